"""Tasks cross between the engine and cairnq 0.15.1 on one database.

Whatever one side submits, the other claims, heartbeats, settles, cancels and
retries through store-level operations, and keys resolve the same whichever
side wrote them. Every test runs on SQLite and on Postgres, both ways round.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from interop_support import Pair

pytestmark = pytest.mark.peer

DIRECTIONS = pytest.mark.parametrize(
    ("producer", "consumer"),
    [("peer", "engine"), ("engine", "peer")],
    ids=["peer>engine", "engine>peer"],
)

PAYLOAD = {
    "text": "café — 日本語 — ü",
    "nested": {"list": [1, 2.5, None, True, {"deep": []}], "empty": {}},
    "big": 2**53 + 1,
    "neg": -7,
    "quote": 'a "quoted" \\ backslash',
}


async def raises_named(name: str, call: Any) -> Any:
    """Await ``call``; it must raise an error of class ``name`` (either side's own class)."""
    with pytest.raises(Exception) as info:
        await call
    assert type(info.value).__name__ == name, repr(info.value)
    return info.value


def fields(task: Any, *names: str) -> dict[str, Any]:
    return {name: getattr(task, name) for name in names}


@DIRECTIONS
async def test_claimed_heartbeated_and_completed_by_the_other_side(
    pair: Pair, producer: str, consumer: str
) -> None:
    up, down = pair.side(producer), pair.side(consumer)
    task = await up.submit(
        name="resize",
        payload=PAYLOAD,
        queue="media",
        priority=2,
        metadata={"by": producer},
        correlation_id="corr-1",
    )
    await up.submit(name="other", payload={}, queue="media")

    [claimed] = await down.claim(queues=["media"], worker_id="w1", lease_ms=5_000, names=["resize"])
    assert claimed.id == task.id
    assert claimed.payload == PAYLOAD
    assert fields(claimed, "status", "attempt", "worker_id", "metadata", "correlation_id") == {
        "status": "running",
        "attempt": 1,
        "worker_id": "w1",
        "metadata": {"by": producer},
        "correlation_id": "corr-1",
    }
    assert claimed.root_id == task.id

    beat = await down.heartbeat(task_id=task.id, worker_id="w1", lease_ms=10_000)
    assert beat.lease_until_ms > claimed.lease_until_ms
    await down.progress(task_id=task.id, worker_id="w1", progress=0.5, message="half")
    seen = await up.get(task.id)
    assert fields(seen, "status", "progress", "message") == {
        "status": "running",
        "progress": 0.5,
        "message": "half",
    }

    done = await down.complete(task_id=task.id, worker_id="w1", result={"out": ["ü", 1.5]})
    assert done.status == "succeeded"
    final = await up.get(task.id)
    assert fields(final, "status", "result", "progress", "message", "lease_until_ms") == {
        "status": "succeeded",
        "result": {"out": ["ü", 1.5]},
        "progress": 1.0,
        "message": "half",
        "lease_until_ms": None,
    }
    assert final.completed_at_ms is not None
    assert await up.stats("media") == await down.stats("media")
    assert (await up.stats("media"))["media"]["succeeded"] == 1
    assert (
        [t.id for t in await up.list(correlation_id="corr-1")]
        == [t.id for t in await down.list(correlation_id="corr-1")]
        == [task.id]
    )


@DIRECTIONS
async def test_failures_requeue_then_fail_then_retry_across_sides(
    pair: Pair, producer: str, consumer: str
) -> None:
    up, down = pair.side(producer), pair.side(consumer)
    task = await up.submit(name="flaky", payload={"n": 1}, max_attempts=2)
    error = {
        "type": "Boom",
        "code": "handler_error",
        "message": "first",
        "retryable": True,
        "details": {},
    }

    await down.claim(queues=["default"], worker_id="w1", lease_ms=5_000)
    requeued = await down.fail(task_id=task.id, worker_id="w1", error=error, retryable=True)
    seen = await up.get(task.id)
    assert fields(seen, "status", "attempt", "worker_id", "error", "completed_at_ms") == {
        "status": "queued",
        "attempt": 1,
        "worker_id": None,
        "error": error,
        "completed_at_ms": None,
    }
    assert requeued.status == "queued"

    [again] = await down.claim(queues=["default"], worker_id="w2", lease_ms=5_000)
    assert again.attempt == 2
    await down.fail(task_id=task.id, worker_id="w2", error={**error, "message": "second"})
    failed = await up.get(task.id)
    assert (failed.status, failed.error["message"], failed.worker_id) == ("failed", "second", "w2")

    retried = await up.retry(task.id, reset_attempt=True)
    assert fields(retried, "status", "attempt", "error", "worker_id") == {
        "status": "queued",
        "attempt": 0,
        "error": None,
        "worker_id": None,
    }
    [third] = await down.claim(queues=["default"], worker_id="w3", lease_ms=5_000)
    assert third.attempt == 1
    await down.fail(task_id=task.id, worker_id="w3", error=error, retryable=False)
    assert (await up.get(task.id)).status == "failed"


@DIRECTIONS
async def test_cancel_from_one_side_wins_on_the_other(
    pair: Pair, producer: str, consumer: str
) -> None:
    up, down = pair.side(producer), pair.side(consumer)
    waiting = await up.submit(name="job", payload={}, priority=-1)
    running = await up.submit(name="job", payload={}, priority=1)
    keep = await up.submit(name="job", payload={})

    claimed = await down.claim(queues=["default"], worker_id="w1", lease_ms=5_000, limit=2)
    assert {t.id for t in claimed} == {running.id, keep.id}

    assert (await up.cancel(waiting.id)).status == "canceled"
    requested = await up.cancel(running.id)
    assert requested.status == "running" and requested.cancel_requested_at_ms is not None

    held = await down.heartbeat_batch(task_ids=[running.id, keep.id, waiting.id], worker_id="w1")
    assert held == {running.id: True, keep.id: False}

    # complete finalises as canceled and drops the new result; fail likewise.
    ended = await down.complete(task_id=running.id, worker_id="w1", result={"late": True})
    assert (ended.status, ended.result) == ("canceled", None)
    assert (await up.get(running.id)).status == "canceled"
    assert await up.cancel(running.id) is None  # terminal: nothing to cancel

    await up.cancel(keep.id)
    failed = await down.fail(
        task_id=keep.id,
        worker_id="w1",
        error={"type": "E", "code": "e", "message": "m", "retryable": True, "details": {}},
    )
    assert failed.status == "canceled"

    back = await down.retry(waiting.id)
    assert back.status == "queued"
    assert (await up.get_status(waiting.id)).status == "queued"


@DIRECTIONS
async def test_an_expired_lease_is_recovered_by_the_other_side(
    pair: Pair, producer: str, consumer: str
) -> None:
    up, down = pair.side(producer), pair.side(consumer)
    task = await up.submit(name="job", payload={})
    await up.claim(queues=["default"], worker_id="dead", lease_ms=100)
    await asyncio.sleep(0.25)

    [recovered] = await down.claim(queues=["default"], worker_id="alive", lease_ms=5_000)
    assert (recovered.id, recovered.attempt, recovered.worker_id) == (task.id, 2, "alive")
    error = await raises_named("LostLease", up.heartbeat(task_id=task.id, worker_id="dead"))
    assert error.task_id == task.id
    assert await up.heartbeat_batch(task_ids=[task.id], worker_id="dead") == {}


@DIRECTIONS
async def test_keys_and_all_four_conflict_strategies_cross_sides(
    pair: Pair, producer: str, consumer: str
) -> None:
    first, second = pair.side(producer), pair.side(consumer)
    t1 = await first.submit(name="job", payload={"v": 1}, key="k")

    assert (
        await second.submit(name="job", payload={"v": 2}, key="k", conflict="reuse")
    ).id == t1.id
    assert (
        await second.submit(name="job", payload={}, key="k", conflict="reuse-succeeded")
    ).id == t1.id
    error = await raises_named(
        "AlreadyExists", second.submit(name="job", payload={}, key="k", conflict="reject")
    )
    assert error.key == "k"
    assert (await second.get_by_key("k")).payload == {"v": 1}

    # The first side runs it to success; reuse-succeeded hands the result back.
    await first.claim(queues=["default"], worker_id="w", lease_ms=5_000)
    await first.complete(task_id=t1.id, worker_id="w", result={"r": 1})
    same = await second.submit(name="job", payload={}, key="k", conflict="reuse-succeeded")
    assert (same.id, same.status, same.result) == (t1.id, "succeeded", {"r": 1})

    # Plain reuse does not hand out a terminal task: the key moves on.
    t2 = await second.submit(name="job", payload={"v": 3}, key="k", conflict="reuse")
    assert t2.id != t1.id and t2.status == "queued"
    assert (await first.get_by_key("k")).id == t2.id
    assert (await first.get(t1.id)).status == "succeeded"  # left untouched

    # replace cancels the live task it displaces.
    t3 = await first.submit(name="job", payload={"v": 4}, key="k", conflict="replace")
    assert (await second.get(t2.id)).status == "canceled"
    assert (await second.get_status_by_key("k")).id == t3.id

    canceled = await second.cancel_by_key("k")
    assert (canceled.id, canceled.status) == (t3.id, "canceled")
    retried = await first.retry_by_key("k")
    assert (retried.id, retried.status) == (t3.id, "queued")
    await first.cancel(t3.id)

    # Purging every terminal task frees the key even for reject. The cutoff is
    # strict (completed before now), so let the last cancel's millisecond pass.
    await asyncio.sleep(0.005)
    purged = await second.purge(older_than_ms=0)
    assert set(purged) == {t1.id, t2.id, t3.id}
    assert await first.get_by_key("k") is None
    t4 = await first.submit(name="job", payload={}, key="k", conflict="reject")
    assert (await second.get_by_key("k")).id == t4.id


@DIRECTIONS
async def test_reads_agree_across_sides(pair: Pair, producer: str, consumer: str) -> None:
    up, down = pair.side(producer), pair.side(consumer)
    for i in range(3):
        await up.submit(name=f"n{i % 2}", payload={"i": i}, queue="q")
    await up.submit(name="late", payload={}, queue="q", delay_ms=60_000)
    await down.claim(queues=["q"], worker_id="w", lease_ms=5_000, names=["n1"])

    assert await up.stats() == await down.stats()
    assert await up.queue_depth("q", 10) == await down.queue_depth("q", 10) == 7
    for kwargs in ({"queue": "q"}, {"name": "n0"}, {"status": "running"}):
        ours = [(t.id, t.status) for t in await up.list(**kwargs)]
        assert ours == [(t.id, t.status) for t in await down.list(**kwargs)], kwargs
    # The delayed task is not claimable by either side yet.
    assert len(await down.claim(queues=["q"], worker_id="w", limit=10)) == 2
    assert await up.claim(queues=["q"], worker_id="w", limit=10) == []


async def test_concurrent_same_key_submits_from_both_sides_make_one_task(pair: Pair) -> None:
    # Both sides must serialise keyed submits on the same lock (on Postgres the
    # advisory lock on hashtextextended(key, 0)), or two of these insert twice.
    sides = [pair.engine, pair.peer] * 10
    tasks = await asyncio.gather(
        *(side.submit(name="job", payload={"i": i}, key="hot") for i, side in enumerate(sides))
    )
    assert len({task.id for task in tasks}) == 1
    assert len(await pair.engine.list(name="job")) == 1
    assert (await pair.peer.get_by_key("hot")).id == tasks[0].id
