"""PostgresStore: every operation and state transition against the real server.

Each test runs in its own throwaway schema. Expired leases are produced with a
1 ms lease and a short sleep, because the store takes all time from the
database clock and accepts no absolute times.
"""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest

from engine import (
    AlreadyExists,
    LostLease,
    PostgresStore,
    SerializationError,
    StoreClosed,
    Task,
)

W = "worker_A"


@pytest.fixture
def store(pg_store: PostgresStore) -> PostgresStore:
    return pg_store


async def claim_one(store: PostgresStore, queue: str = "default", **kw: Any) -> Task:
    (task,) = await store.claim(queues=[queue], worker_id=kw.pop("worker_id", W), **kw)
    return task


async def expire(store: PostgresStore, queue: str = "default", **kw: Any) -> Task:
    """Claim with a 1 ms lease and let it run out."""
    task = await claim_one(store, queue, lease_ms=1, **kw)
    await asyncio.sleep(0.02)
    return task


# -- submit ------------------------------------------------------------------------


async def test_submit_defaults_and_database_clock(store: PostgresStore) -> None:
    task = await store.submit(name="email.send", payload=None, metadata={"a": 1})
    assert task.status == "queued"
    assert task.payload == {} and task.metadata == {"a": 1}
    assert (task.queue, task.attempt, task.max_attempts, task.priority) == ("default", 0, 3, 0)
    assert task.root_id == task.id and task.parent_id is None and task.correlation_id is None
    assert task.created_at_ms == task.updated_at_ms == task.run_at_ms
    assert task.result is None and task.error is None and task.worker_id is None
    assert await store.get(task.id) == task


async def test_submit_delay_and_lineage(store: PostgresStore) -> None:
    task = await store.submit(
        name="n",
        payload=[1, "x"],
        queue="q",
        delay_ms=60_000,
        priority=5,
        max_attempts=7,
        parent_id="task_parent",
        root_id="task_root",
        correlation_id="corr",
    )
    assert task.run_at_ms == task.created_at_ms + 60_000
    assert (task.parent_id, task.root_id, task.correlation_id) == (
        "task_parent",
        "task_root",
        "corr",
    )
    assert (task.priority, task.max_attempts, task.payload) == (5, 7, [1, "x"])
    # Not due: nothing to claim.
    assert await store.claim(queues=["q"], worker_id=W) == []


async def test_jsonb_nul_is_refused_before_writing(store: PostgresStore) -> None:
    with pytest.raises(SerializationError, match="NUL"):
        await store.submit(name="n", payload={"s": "a\x00b"})
    with pytest.raises(SerializationError):
        await store.submit(name="n", payload={"x": float("nan")})
    assert await store.list() == []
    # An escaped backslash followed by "u0000" is ordinary text, not a NUL.
    task = await store.submit(name="n", payload={"s": "\\u0000"})
    assert task.payload == {"s": "\\u0000"}


async def test_json_strings_round_trip_without_reparsing(store: PostgresStore) -> None:
    task = await store.submit(name="n", payload="42", metadata={"k": "\u00e9"})
    assert (await store.get(task.id)).payload == "42"  # type: ignore[union-attr]
    claimed = await claim_one(store)
    done = await store.complete(task_id=claimed.id, worker_id=W, result='"quoted"')
    assert done.result == '"quoted"' and done.metadata == {"k": "\u00e9"}


# -- keys and conflicts ------------------------------------------------------------


async def test_reuse_returns_live_task_and_terminal_frees_key(store: PostgresStore) -> None:
    first = await store.submit(name="n", key="k")
    assert (await store.submit(name="n", key="k")).id == first.id
    claimed = await claim_one(store)
    assert (await store.submit(name="n", key="k")).id == first.id  # running is live
    await store.complete(task_id=claimed.id, worker_id=W)
    second = await store.submit(name="n", key="k")
    assert second.id != first.id
    assert (await store.get_by_key("k")).id == second.id  # type: ignore[union-attr]


async def test_reuse_succeeded_hands_back_succeeded_only(store: PostgresStore) -> None:
    first = await store.submit(name="n", key="k", conflict="reuse-succeeded")
    claimed = await claim_one(store)
    await store.complete(task_id=claimed.id, worker_id=W, result={"r": 1})
    again = await store.submit(name="n", key="k", conflict="reuse-succeeded")
    assert again.id == first.id and again.result == {"r": 1}
    # A failed task is never handed out.
    await store.submit(name="f", key="kf")
    claimed = await claim_one(store)
    await store.fail(task_id=claimed.id, worker_id=W, error={"m": 1}, retryable=False)
    fresh = await store.submit(name="f", key="kf", conflict="reuse-succeeded")
    assert fresh.id != claimed.id and fresh.status == "queued"


async def test_reject_raises_for_any_existing_task(store: PostgresStore) -> None:
    first = await store.submit(name="n", key="k", conflict="reject")
    with pytest.raises(AlreadyExists) as info:
        await store.submit(name="n", key="k", conflict="reject")
    assert info.value.key == "k"
    await store.cancel(first.id)
    with pytest.raises(AlreadyExists):
        await store.submit(name="n", key="k", conflict="reject")
    assert len(await store.list()) == 1
    # A pointer to a purged task is a free key, for reject too.
    assert await store.purge() == [first.id]
    assert (await store.submit(name="n", key="k", conflict="reject")).status == "queued"


async def test_replace_cancels_live_and_leaves_terminal(store: PostgresStore) -> None:
    queued = await store.submit(name="n", key="k")
    replacement = await store.submit(name="n", key="k", conflict="replace")
    assert (await store.get(queued.id)).status == "canceled"  # type: ignore[union-attr]
    running = await claim_one(store)
    assert running.id == replacement.id
    third = await store.submit(name="n", key="k", conflict="replace")
    still = await store.get(running.id)
    assert still is not None and still.status == "running" and still.cancel_requested
    assert (await store.get_status_by_key("k")).id == third.id  # type: ignore[union-attr]
    done = await store.cancel(third.id)
    assert done is not None and done.status == "canceled"
    fourth = await store.submit(name="n", key="k", conflict="replace")
    after = await store.get(third.id)
    assert after == done and fourth.id != third.id


async def test_concurrent_same_key_submits_from_two_stores(
    pg_dsn: str, pg_schema: str, store: PostgresStore
) -> None:
    other = PostgresStore(pg_dsn, schema=pg_schema, max_size=4)
    await other.connect()
    try:
        submits = [
            (store if i % 2 else other).submit(name="n", key="hot", conflict="reuse")
            for i in range(24)
        ]
        results = await asyncio.gather(*submits)
        assert len({t.id for t in results}) == 1
        live = [t for t in await store.list() if t.status in ("queued", "running")]
        assert len(live) == 1
        # replace from both sides at once: still exactly one live task at the end.
        await asyncio.gather(
            *[
                (store if i % 2 else other).submit(name="n", key="hot", conflict="replace")
                for i in range(10)
            ]
        )
        live = [t for t in await store.list(limit=100) if t.status == "queued"]
        assert len(live) == 1
        assert (await store.get_by_key("hot")).id == live[0].id  # type: ignore[union-attr]
    finally:
        await other.close()


# -- reads ---------------------------------------------------------------------------


async def test_reads_of_unknown_ids_and_keys(store: PostgresStore) -> None:
    assert await store.get("task_nope") is None
    assert await store.get_by_key("nope") is None
    assert await store.get_status("task_nope") is None
    assert await store.get_status_by_key("nope") is None
    task = await store.submit(name="n", key="k")
    ref = await store.get_status("" + task.id)
    assert ref is not None and (ref.id, ref.status, ref.is_terminal) == (task.id, "queued", False)


async def test_list_filters_order_and_paging(store: PostgresStore) -> None:
    a = await store.submit(name="a", queue="q1", correlation_id="c")
    await asyncio.sleep(0.002)
    b = await store.submit(name="b", queue="q2", root_id=a.id)
    await asyncio.sleep(0.002)
    c = await store.submit(name="a", queue="q2")
    assert [t.id for t in await store.list()] == [c.id, b.id, a.id]
    assert [t.id for t in await store.list(queue="q2")] == [c.id, b.id]
    assert [t.id for t in await store.list(name="a", queue="q2")] == [c.id]
    assert [t.id for t in await store.list(root_id=a.id)] == [b.id, a.id]
    assert [t.id for t in await store.list(correlation_id="c")] == [a.id]
    assert [t.id for t in await store.list(limit=1, offset=1)] == [b.id]
    assert await store.list(status="failed") == []
    with pytest.raises(ValueError):
        await store.list(status="bogus")
    with pytest.raises(ValueError):
        await store.list(limit=-1)


async def test_stats_and_queue_depth(store: PostgresStore) -> None:
    assert await store.stats() == {}
    assert await store.stats("empty") == {
        "empty": {"queued": 0, "running": 0, "succeeded": 0, "failed": 0, "canceled": 0}
    }
    for _ in range(3):
        await store.submit(name="n", queue="q")
    await store.submit(name="n", queue="q", delay_ms=60_000)
    await store.submit(name="n", queue="other")
    await claim_one(store, "q")
    stats = await store.stats()
    assert stats["q"] == {"queued": 3, "running": 1, "succeeded": 0, "failed": 0, "canceled": 0}
    assert set(stats) == {"q", "other"}
    assert set(await store.stats("q")) == {"q"}
    assert await store.queue_depth("q", 10) == 7  # delayed counts, running does not
    assert await store.queue_depth("q", 2) == 0
    assert await store.queue_depth("q", 0) == 0
    assert await store.queue_depth("none", 5) == 5


# -- cancel / retry / purge ----------------------------------------------------------


async def test_cancel_queued_running_and_terminal(store: PostgresStore) -> None:
    queued = await store.submit(name="n", queue="a")
    canceled = await store.cancel(queued.id)
    assert canceled is not None and canceled.status == "canceled"
    assert canceled.completed_at_ms is not None and canceled.cancel_requested_at_ms is None
    assert await store.cancel(queued.id) is None  # terminal: untouched
    assert await store.cancel("task_unknown") is None

    await store.submit(name="n", queue="b")
    running = await claim_one(store, "b")
    flagged = await store.cancel(running.id)
    assert flagged is not None and flagged.status == "running"
    assert flagged.cancel_requested_at_ms is not None
    assert flagged.lease_until_ms == running.lease_until_ms and flagged.worker_id == W


async def test_cancel_and_retry_by_key(store: PostgresStore) -> None:
    assert await store.cancel_by_key("none") is None
    assert await store.retry_by_key("none") is None
    task = await store.submit(name="n", key="k")
    assert (await store.cancel_by_key("k")).status == "canceled"  # type: ignore[union-attr]
    again = await store.retry_by_key("k", reset_attempt=True)
    assert again is not None and again.id == task.id and again.status == "queued"


async def test_retry_failed_and_canceled_only(store: PostgresStore) -> None:
    await store.submit(name="n", max_attempts=1)
    claimed = await claim_one(store)
    await store.progress(task_id=claimed.id, worker_id=W, progress=0.5, message="m")
    failed = await store.fail(task_id=claimed.id, worker_id=W, error={"type": "X"})
    assert failed.status == "failed"  # attempt 1 of 1
    retried = await store.retry(claimed.id)
    assert retried is not None and retried.status == "queued"
    assert retried.attempt == 1 and retried.error is None and retried.worker_id is None
    assert retried.progress is None and retried.message is None
    assert retried.completed_at_ms is None and retried.lease_until_ms is None
    assert retried.run_at_ms >= failed.updated_at_ms
    assert await store.retry(claimed.id) is None  # queued: untouched
    again = await claim_one(store)
    done = await store.complete(task_id=again.id, worker_id=W, result=1)
    assert await store.retry(done.id) is None  # succeeded cannot be retried
    reset = await store.submit(name="r")
    await store.cancel(reset.id)
    assert (await store.retry(reset.id, reset_attempt=True)).attempt == 0  # type: ignore[union-attr]


async def test_purge_terminal_filters_limit_and_key_cascade(store: PostgresStore) -> None:
    ids = []
    for i in range(4):
        t = await store.submit(name=f"n{i % 2}", queue="q" if i < 3 else "r", key=f"k{i}")
        await store.cancel(t.id)
        ids.append(t.id)
        await asyncio.sleep(0.002)
    live = await store.submit(name="n0", queue="q")
    assert await store.purge(older_than_ms=3_600_000) == []
    assert await store.purge(status="failed") == []
    assert await store.purge(queue="q", name="n0", limit=1) == [ids[0]]
    assert await store.purge(limit=10) == [ids[1], ids[2], ids[3]]
    assert await store.get(live.id) is not None
    assert await store.get_by_key("k0") is None
    # The key rows went with their tasks: the key is free again.
    assert (await store.submit(name="n", key="k0", conflict="reject")).status == "queued"
    with pytest.raises(ValueError):
        await store.purge(status="queued")
    with pytest.raises(ValueError):
        await store.purge(limit=0)


# -- claims ------------------------------------------------------------------------------


async def test_claim_order_limit_and_lease(store: PostgresStore) -> None:
    low = await store.submit(name="n", priority=0)
    high = await store.submit(name="n", priority=9)
    await store.submit(name="n", priority=9, delay_ms=60_000)
    first = await claim_one(store, lease_ms=5_000)
    assert first.id == high.id and first.status == "running" and first.attempt == 1
    assert first.worker_id == W
    assert first.lease_until_ms == first.updated_at_ms + 5_000
    rest = await store.claim(queues=["default"], worker_id=W, limit=10)
    assert [t.id for t in rest] == [low.id]


async def test_claim_variants_and_name_filters(store: PostgresStore) -> None:
    for queue in ("q1", "q2"):
        for name in ("a", "b", "c"):
            await store.submit(name=name, queue=queue)
    assert await store.claim(queues=["q1"], worker_id=W, names=[]) == []
    assert await store.claim(queues=["q1"], worker_id=W, limit=0) == []
    got = await store.claim(queues=["q1"], worker_id=W, names=["a"], limit=5)
    assert [(t.queue, t.name) for t in got] == [("q1", "a")]
    got = await store.claim(queues=["q1"], worker_id=W, names=["b", "c"], limit=5)
    assert sorted(t.name for t in got) == ["b", "c"]
    got = await store.claim(queues=["q1", "q2"], worker_id=W, names=["a"], limit=5)
    assert [(t.queue, t.name) for t in got] == [("q2", "a")]
    got = await store.claim(queues=["q2", "q3"], worker_id=W, names=None, limit=5)
    assert sorted(t.name for t in got) == ["b", "c"]
    assert await store.claim(queues=["q1", "q2"], worker_id=W, limit=5) == []


async def test_claim_session_plan_draws_in_one_transaction(store: PostgresStore) -> None:
    for name in ("a", "a", "b"):
        await store.submit(name=name)

    async def plan(draw: Any) -> list[list[str]]:
        first = await draw(["a"], 1)
        second = await draw(["a", "b"], 5 - len(first))
        return [[t.name for t in first], sorted(t.name for t in second)]

    value = await store.claim_session(queues=["default"], worker_id=W, names=["a", "b"], plan=plan)
    assert value == [["a"], ["a", "b"]]
    # Nothing claimable: the plan is not even called.
    assert await store.claim_session(queues=["default"], worker_id=W, names=None, plan=plan) is None


async def test_plan_error_rolls_back_its_draws(store: PostgresStore) -> None:
    task = await store.submit(name="a")

    async def plan(draw: Any) -> None:
        await draw(None, 1)
        raise RuntimeError("plan failed")

    with pytest.raises(RuntimeError):
        await store.claim_session(queues=["default"], worker_id=W, names=None, plan=plan)
    assert (await store.get(task.id)).status == "queued"  # type: ignore[union-attr]


# -- owned writes ----------------------------------------------------------------------------


async def test_heartbeat_and_ownership(store: PostgresStore) -> None:
    await store.submit(name="n")
    task = await claim_one(store, lease_ms=1_000)
    beat = await store.heartbeat(task_id=task.id, worker_id=W, lease_ms=60_000)
    assert beat.lease_until_ms is not None and beat.lease_until_ms >= beat.updated_at_ms + 60_000
    with pytest.raises(LostLease) as info:
        await store.heartbeat(task_id=task.id, worker_id="worker_B")
    assert info.value.task_id == task.id
    with pytest.raises(LostLease):
        await store.progress(task_id="task_nope", worker_id=W, progress=0.1)


async def test_heartbeat_batch_per_row_ownership(store: PostgresStore) -> None:
    for _ in range(3):
        await store.submit(name="n")
    a, b, c = await store.claim(queues=["default"], worker_id=W, limit=3)
    await store.cancel(b.id)
    await store.complete(task_id=c.id, worker_id=W)
    beats = await store.heartbeat_batch(task_ids=[c.id, b.id, a.id, "task_x"], worker_id=W)
    assert beats == {b.id: True, a.id: False}
    assert await store.heartbeat_batch(task_ids=[], worker_id=W) == {}


async def test_expired_lease_is_not_owned(store: PostgresStore) -> None:
    await store.submit(name="n")
    task = await expire(store)
    with pytest.raises(LostLease):
        await store.complete(task_id=task.id, worker_id=W)
    assert await store.heartbeat_batch(task_ids=[task.id], worker_id=W) == {}


async def test_progress_coalesces(store: PostgresStore) -> None:
    await store.submit(name="n")
    task = await claim_one(store)
    p = await store.progress(task_id=task.id, worker_id=W, progress=0.25, message="start")
    assert (p.progress, p.message, p.status) == (0.25, "start", "running")
    p = await store.progress(task_id=task.id, worker_id=W, message="more")
    assert (p.progress, p.message) == (0.25, "more")
    p = await store.progress(task_id=task.id, worker_id=W, progress=0.5)
    assert (p.progress, p.message) == (0.5, "more")
    with pytest.raises(ValueError):
        await store.progress(task_id=task.id, worker_id=W, progress=float("inf"))


async def test_complete_succeed_and_cancel_wins(store: PostgresStore) -> None:
    for _ in range(3):
        await store.submit(name="n")
    a, b, c = await store.claim(queues=["default"], worker_id=W, limit=3)
    ok = await store.complete(task_id=a.id, worker_id=W, result={"r": [1]})
    assert (ok.status, ok.result, ok.progress, ok.lease_until_ms) == (
        "succeeded",
        {"r": [1]},
        1.0,
        None,
    )
    assert ok.completed_at_ms is not None and ok.worker_id == W

    await store.progress(task_id=b.id, worker_id=W, progress=0.3)
    await store.cancel(b.id)
    canceled = await store.complete(task_id=b.id, worker_id=W, result="dropped")
    assert (canceled.status, canceled.result, canceled.progress) == ("canceled", None, 0.3)

    await store.cancel(c.id)
    raw = await store.succeed(task_id=c.id, worker_id=W, result=None)
    assert (raw.status, raw.result, raw.progress) == ("succeeded", None, 1.0)
    with pytest.raises(LostLease):  # settled: no longer owned
        await store.succeed(task_id=c.id, worker_id=W)


async def test_fail_branches(store: PostgresStore) -> None:
    for _ in range(3):
        await store.submit(name="n", max_attempts=2)
    a, b, c = await store.claim(queues=["default"], worker_id=W, limit=3)
    err = {"type": "E", "code": "c", "message": "m", "retryable": True, "details": {}}

    await store.progress(task_id=a.id, worker_id=W, progress=0.4, message="x")
    requeued = await store.fail(task_id=a.id, worker_id=W, error=err, delay_ms=30_000)
    assert (requeued.status, requeued.worker_id, requeued.error) == ("queued", None, err)
    assert requeued.run_at_ms == requeued.updated_at_ms + 30_000
    assert (requeued.progress, requeued.message, requeued.completed_at_ms) == (None, None, None)

    permanent = await store.fail(task_id=b.id, worker_id=W, error=err, retryable=False)
    assert (permanent.status, permanent.worker_id) == ("failed", W)
    assert permanent.completed_at_ms is not None and permanent.lease_until_ms is None

    await store.cancel(c.id)
    canceled = await store.fail(task_id=c.id, worker_id=W, error=err)
    assert (canceled.status, canceled.error) == ("canceled", err)


async def test_fail_at_max_attempts_and_unserialisable_envelope(store: PostgresStore) -> None:
    await store.submit(name="n", max_attempts=1)
    task = await claim_one(store)
    failed = await store.fail(
        task_id=task.id, worker_id=W, error={"type": "T", "message": "a\x00b", "x": {1, 2}}
    )
    assert failed.status == "failed"
    # The set makes the envelope unserialisable: a reduced one is stored instead.
    assert failed.error is not None and failed.error["type"] == "T"
    assert failed.error["retryable"] is True and failed.error["details"] == {}


async def test_recovery_branches_and_global_probe(store: PostgresStore) -> None:
    await store.submit(name="n", queue="q", max_attempts=2)
    await store.submit(name="n", queue="q", max_attempts=1)
    await store.submit(name="n", queue="q", max_attempts=5)
    a, b, c = sorted(
        await store.claim(queues=["q"], worker_id=W, limit=3, lease_ms=300),
        key=lambda t: t.max_attempts,
    )
    await store.cancel(c.id)
    await store.progress(task_id=a.id, worker_id=W, progress=0.5)
    await store.progress(task_id=b.id, worker_id=W, progress=0.5)
    await asyncio.sleep(0.35)
    # A claim on another queue still recovers (the lease arm is global), and
    # claims nothing because "elsewhere" is empty.
    assert await store.claim(queues=["elsewhere"], worker_id=W) == []
    recovered_b = await store.get(b.id)
    recovered_a = await store.get(a.id)
    recovered_c = await store.get(c.id)
    assert recovered_a is not None and recovered_b is not None and recovered_c is not None
    assert (recovered_b.status, recovered_b.worker_id) == ("queued", None)
    assert recovered_b.run_at_ms == recovered_b.updated_at_ms and recovered_b.progress is None
    assert recovered_a.status == "failed" and recovered_a.error is not None
    assert recovered_a.error["code"] == "lease_expired" and recovered_a.worker_id == W
    assert recovered_a.progress == 0.5 and recovered_a.completed_at_ms is not None
    assert recovered_c.status == "canceled" and recovered_c.lease_until_ms is None


async def test_recovery_keeps_previous_error(store: PostgresStore) -> None:
    await store.submit(name="n", max_attempts=3)
    first = await claim_one(store)
    await store.fail(task_id=first.id, worker_id=W, error={"type": "E1"})
    await expire(store)
    await store.claim(queues=["default"], worker_id=W, limit=0)  # probe+recover only
    await store.claim(queues=["nothing"], worker_id=W)
    task = await store.get(first.id)
    assert task is not None and task.status == "queued" and task.error is not None
    assert task.error["type"] == "E1" and task.attempt == 2


# -- transactional completion --------------------------------------------------------------


async def test_complete_in_commits_with_callers_write(store: PostgresStore, pg_schema: str) -> None:
    async def make_table(conn: Any) -> None:
        await conn.execute("create table side (v text)")

    await store.submit(name="n")
    task = await claim_one(store)
    await store.complete_in(task_id=task.id, worker_id=W, result=None, write=make_table)

    async def write(conn: Any) -> None:
        await conn.execute("insert into side values ('written')")

    await store.submit(name="n")
    task = await claim_one(store)
    done = await store.succeed_in(task_id=task.id, worker_id=W, result={"ok": 1}, write=write)
    assert done.status == "succeeded" and done.result == {"ok": 1}
    # Lease lost: the caller's write is rolled back with the settle.
    with pytest.raises(LostLease):
        await store.complete_in(task_id=task.id, worker_id=W, write=write)
    with psycopg.connect(store._dsn, autocommit=True) as conn:  # the side table's contents
        rows = conn.execute(f'select v from "{pg_schema}".side').fetchall()
    assert rows == [("written",)]


async def test_protocol_version_read_statement_and_close(store: PostgresStore) -> None:
    assert await store.protocol_version() == 1
    task = await store.submit(name="n", queue="q")
    rows = await store.read_statement("get_status", {"id": task.id})
    assert rows == [{"id": task.id, "status": "queued"}]
    with pytest.raises(ValueError):
        await store.read_statement("cancel", {"id": task.id})
    await store.close()
    with pytest.raises(StoreClosed):
        await store.get(task.id)
