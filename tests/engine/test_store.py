"""Every store operation and state transition, one suite run on SQLite and on Postgres.

The ``store`` fixture (tests/engine/conftest.py) gives a connected store on a
fresh SQLite file or a throwaway Postgres schema; ``database`` reads the same
tables on a connection of its own. What only one dialect has lives in
test_sqlite_store.py and test_postgres_store.py. Expired leases are produced
with a short lease and a sleep: the stores accept no absolute times.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest
from store_support import Database
from worker_support import eventually

from engine import (
    AlreadyExists,
    LostLease,
    SerializationError,
    StoreClosed,
    Task,
    TaskRef,
    TaskStore,
    WatchSignal,
)

W = "worker_test"
ERROR = {"type": "E", "code": "c", "message": "m", "retryable": True, "details": {}}


async def claim_one(store: TaskStore, queue: str = "default", **kw: Any) -> Task:
    claimed = await store.claim(queues=[queue], worker_id=kw.pop("worker_id", W), **kw)
    assert len(claimed) == 1
    return claimed[0]


async def expire(store: TaskStore, queue: str = "default", **kw: Any) -> Task:
    """Claim with a 1 ms lease and let it run out."""
    task = await claim_one(store, queue, lease_ms=1, **kw)
    await asyncio.sleep(0.02)
    return task


def as_json(value: Any) -> Any:
    """A JSON column as read raw: text on SQLite, decoded by psycopg on Postgres."""
    return json.loads(value) if isinstance(value, str) else value


# -- submit ------------------------------------------------------------------------


async def test_submit_returns_what_get_reads(store: TaskStore) -> None:
    task = await store.submit(
        name="mail.send",
        payload={"to": "a@b", "n": [1, 2.5, None], "é": True},
        queue="q1",
        max_attempts=5,
        priority=3,
        metadata={"m": 1},
        correlation_id="corr",
        delay_ms=60_000,
    )
    assert task == await store.get(task.id)
    assert task.status == "queued" and task.attempt == 0
    assert task.root_id == task.id and task.parent_id is None
    assert task.run_at_ms == task.created_at_ms + 60_000
    assert await store.get_status(task.id) == TaskRef(task.id, "queued")


async def test_submit_defaults_and_clock(store: TaskStore) -> None:
    task = await store.submit(name="email.send", payload=None, metadata={"a": 1})
    assert task.status == "queued"
    assert task.payload == {} and task.metadata == {"a": 1}
    assert (task.queue, task.attempt, task.max_attempts, task.priority) == ("default", 0, 3, 0)
    assert task.root_id == task.id and task.parent_id is None and task.correlation_id is None
    assert task.created_at_ms == task.updated_at_ms == task.run_at_ms
    assert task.result is None and task.error is None and task.worker_id is None
    assert await store.get(task.id) == task


async def test_submit_delay_and_lineage(store: TaskStore) -> None:
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


async def test_payload_none_is_empty_object_and_result_none_is_sql_null(
    store: TaskStore, database: Database
) -> None:
    task = await store.submit(name="x")
    assert task.payload == {} and task.metadata == {}
    claimed = await claim_one(store)
    await store.complete(task_id=claimed.id, worker_id=W, result=None)
    ((payload, result),) = database.rows(
        "select payload, result from cairnq_tasks where id = ?", (task.id,)
    )
    assert (as_json(payload), result) == ({}, None)


async def test_json_strings_round_trip_without_reparsing(store: TaskStore) -> None:
    task = await store.submit(name="n", payload="42", metadata={"k": "\u00e9"})
    assert (await store.get(task.id)).payload == "42"  # type: ignore[union-attr]
    claimed = await claim_one(store)
    done = await store.complete(task_id=claimed.id, worker_id=W, result='"quoted"')
    assert done.result == '"quoted"' and done.metadata == {"k": "\u00e9"}


async def test_unfaithful_json_is_refused_before_writing(store: TaskStore) -> None:
    with pytest.raises(SerializationError):
        await store.submit(name="n", payload={"x": float("nan")})
    assert await store.list() == []


async def test_task_ids_are_ulids_ordered_by_millisecond(store: TaskStore) -> None:
    first = await store.submit(name="x")
    await asyncio.sleep(0.002)
    batch = await asyncio.gather(*(store.submit(name="x") for _ in range(200)))
    pattern = re.compile(r"^task_[0-7][0-9A-HJKMNP-TV-Z]{25}$")
    ids = [first.id, *(t.id for t in batch)]
    assert all(pattern.match(i) for i in ids) and len(set(ids)) == len(ids)
    assert all(first.id < t.id for t in batch)  # a later millisecond sorts later


# -- keys and conflicts ------------------------------------------------------------


async def test_keyed_reuse_returns_live_task_and_terminal_frees_key(store: TaskStore) -> None:
    first = await store.submit(name="x", key="k")
    assert (await store.submit(name="x", key="k")).id == first.id
    t = await claim_one(store)
    assert (await store.submit(name="x", key="k")).id == first.id  # running is live
    await store.complete(task_id=t.id, worker_id=W, result=1)
    fresh = await store.submit(name="x", key="k")
    assert fresh.id != first.id
    assert (await store.get_by_key("k")) == fresh
    assert await store.get_status_by_key("k") == TaskRef(fresh.id, "queued")


async def test_keyed_reuse_succeeded_hands_back_succeeded_only(store: TaskStore) -> None:
    first = await store.submit(name="x", key="k", conflict="reuse-succeeded")
    t = await claim_one(store)
    await store.complete(task_id=t.id, worker_id=W, result={"r": 1})
    again = await store.submit(name="x", key="k", conflict="reuse-succeeded")
    assert again.id == first.id and again.result == {"r": 1}
    # A failed task is never handed out.
    await store.submit(name="f", key="kf")
    claimed = await claim_one(store)
    await store.fail(task_id=claimed.id, worker_id=W, error={"m": 1}, retryable=False)
    fresh = await store.submit(name="f", key="kf", conflict="reuse-succeeded")
    assert fresh.id != claimed.id and fresh.status == "queued"
    await asyncio.sleep(0.005)  # purge's cutoff is strict: let the clock move
    await store.purge()
    replaced = await store.submit(name="x", key="k", conflict="reuse-succeeded")
    assert replaced.id != first.id  # a purged task frees its key


async def test_keyed_failed_and_canceled_are_never_handed_out(store: TaskStore) -> None:
    for conflict in ("reuse", "reuse-succeeded"):
        first = await store.submit(name="x", key=f"k-{conflict}", conflict=conflict)
        await store.cancel(first.id)
        second = await store.submit(name="x", key=f"k-{conflict}", conflict=conflict)
        assert second.id != first.id


async def test_keyed_reject_raises_for_any_existing_task(
    store: TaskStore, database: Database
) -> None:
    first = await store.submit(name="x", key="k", conflict="reject")
    with pytest.raises(AlreadyExists) as info:
        await store.submit(name="x", key="k", conflict="reject")
    assert info.value.key == "k"
    await store.cancel(first.id)
    with pytest.raises(AlreadyExists) as info:
        await store.submit(name="x", key="k", conflict="reject")
    assert info.value.key == "k" and info.value.task_id in (first.id, None)
    assert database.rows("select count(*) from cairnq_tasks") == [(1,)]
    # A pointer to a purged task is a free key, for reject too.
    await asyncio.sleep(0.005)  # purge's cutoff is strict: let the clock move
    assert await store.purge() == [first.id]
    assert (await store.submit(name="x", key="k", conflict="reject")).id != first.id


async def test_keyed_replace_cancels_live_and_leaves_terminal(store: TaskStore) -> None:
    signals: list[WatchSignal] = []
    store.watch(signals.append)
    queued = await store.submit(name="x", key="k", conflict="replace")
    replacement = await store.submit(name="x", key="k", conflict="replace")
    assert replacement.id != queued.id
    assert (await store.get(queued.id)).status == "canceled"  # type: ignore[union-attr]
    assert WatchSignal("done", task_id=queued.id) in signals
    running = await claim_one(store)
    assert running.id == replacement.id
    third = await store.submit(name="x", key="k", conflict="replace")
    flagged = await store.get(replacement.id)
    assert flagged is not None and flagged.status == "running" and flagged.cancel_requested
    assert (await store.get_by_key("k")) == third
    assert (await store.get_status_by_key("k")).id == third.id  # type: ignore[union-attr]
    done = await store.cancel(third.id)
    assert done is not None and done.status == "canceled"
    fourth = await store.submit(name="x", key="k", conflict="replace")
    assert await store.get(third.id) == done and fourth.id != third.id


async def test_concurrent_same_key_submits_from_two_handles(
    store: TaskStore, database: Database
) -> None:
    other = database.twin()
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


async def test_reads_of_unknown_ids_and_keys(store: TaskStore) -> None:
    assert await store.get("task_nope") is None
    assert await store.get_by_key("nope") is None
    assert await store.get_status("task_nope") is None
    assert await store.get_status_by_key("nope") is None
    task = await store.submit(name="n", key="k")
    ref = await store.get_status(task.id)
    assert ref is not None and (ref.id, ref.status, ref.is_terminal) == (task.id, "queued", False)


async def test_list_filters_order_and_paging(store: TaskStore) -> None:
    # Newest first by created_at_ms; ids only break ties inside one millisecond.
    parent = await store.submit(name="p", queue="q1", correlation_id="c1")
    await asyncio.sleep(0.002)
    child = await store.submit(
        name="c", queue="q2", parent_id=parent.id, root_id=parent.id, correlation_id="c1"
    )
    await asyncio.sleep(0.002)
    other = await store.submit(name="c", queue="q1")
    assert [t.id for t in await store.list()] == [other.id, child.id, parent.id]
    assert [t.id for t in await store.list(queue="q2")] == [child.id]
    assert [t.id for t in await store.list(root_id=parent.id)] == [child.id, parent.id]
    assert [t.id for t in await store.list(correlation_id="c1", name="c")] == [child.id]
    assert [t.id for t in await store.list(queue="q1", status="queued")] == [other.id, parent.id]
    assert [t.id for t in await store.list(limit=1, offset=1)] == [child.id]
    assert await store.list(status="failed") == []
    assert await store.list(limit=0) == []
    with pytest.raises(ValueError):
        await store.list(status="bogus")
    with pytest.raises(ValueError):
        await store.list(limit=-1)


async def test_stats_and_queue_depth(store: TaskStore) -> None:
    assert await store.stats() == {}
    assert await store.stats("empty") == {
        "empty": {"queued": 0, "running": 0, "succeeded": 0, "failed": 0, "canceled": 0}
    }
    for _ in range(3):
        await store.submit(name="x", queue="a")
    await store.submit(name="x", queue="a", delay_ms=60_000)
    await store.submit(name="x", queue="b")
    await store.claim(queues=["a"], worker_id=W)
    stats = await store.stats()
    assert stats["a"] == {"queued": 3, "running": 1, "succeeded": 0, "failed": 0, "canceled": 0}
    assert set(stats) == {"a", "b"}
    assert set(await store.stats("b")) == {"b"}
    assert await store.queue_depth("a", 10) == 7  # delayed counts, running does not
    assert await store.queue_depth("a", 2) == 0
    assert await store.queue_depth("a", 0) == 0
    assert await store.queue_depth("none", 5) == 5


async def test_protocol_version_read_statement_and_close(store: TaskStore) -> None:
    assert await store.protocol_version() == 1
    task = await store.submit(name="x", queue="q")
    assert await store.read_statement("get_status", {"id": task.id}) == [
        {"id": task.id, "status": "queued"}
    ]
    found = await store.read_statement("get", {"id": task.id})
    assert len(found) == 1 and found[0]["id"] == task.id and found[0]["status"] == "queued"
    with pytest.raises(ValueError, match="not a read"):
        await store.read_statement("cancel", {"id": task.id, "now_ms": 0})
    with pytest.raises(ValueError):
        await store.read_statement("../etc", {})
    with pytest.raises(ValueError):
        await store.read_statement("no_such_statement", {})
    await store.close()
    with pytest.raises(StoreClosed):
        await store.get(task.id)


async def test_operations_connect_lazily(database: Database) -> None:
    store = database.twin()
    try:
        task = await store.submit(name="x")
        assert await store.get(task.id) == task
    finally:
        await store.close()


async def test_two_handles_on_one_database_share_data_and_signals(
    store: TaskStore, database: Database
) -> None:
    other = database.twin()
    await other.connect()
    try:
        assert store.signals is other.signals
        woke = asyncio.ensure_future(other.claim_wake(["default"], 5_000))
        await asyncio.sleep(0)
        task = await store.submit(name="x")
        assert await woke is True
        claimed = await other.claim(queues=["default"], worker_id=W)
        assert [t.id for t in claimed] == [task.id]
        assert (await store.get(task.id)).status == "running"  # type: ignore[union-attr]
    finally:
        await other.close()


# -- cancel / retry / purge ----------------------------------------------------------


async def test_cancel_queued_running_and_terminal(store: TaskStore) -> None:
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


async def test_cancel_and_retry(store: TaskStore) -> None:
    task = await store.submit(name="x")
    canceled = await store.cancel(task.id)
    assert canceled is not None and canceled.status == "canceled"
    assert canceled.completed_at_ms is not None
    again = await store.retry(task.id)
    assert again is not None and again.status == "queued" and again.completed_at_ms is None
    assert await store.retry(task.id) is None  # queued: nothing to retry
    t = await claim_one(store)
    done = await store.complete(task_id=t.id, worker_id=W, result=7)
    assert await store.retry(done.id) is None  # succeeded is never retried

    await store.submit(name="y", max_attempts=1)
    t = await claim_one(store)
    await store.fail(task_id=t.id, worker_id=W, error=ERROR)
    kept = await store.retry(t.id)
    assert kept is not None and kept.attempt == 1 and kept.error is None and kept.worker_id is None
    t = await claim_one(store)
    await store.fail(task_id=t.id, worker_id=W, error=ERROR)
    reset = await store.retry(t.id, reset_attempt=True)
    assert reset is not None and reset.attempt == 0


async def test_retry_failed_and_canceled_only(store: TaskStore) -> None:
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


async def test_cancel_and_retry_by_key(store: TaskStore) -> None:
    assert await store.cancel_by_key("nope") is None
    assert await store.retry_by_key("nope") is None
    task = await store.submit(name="x", key="k")
    canceled = await store.cancel_by_key("k")
    assert canceled is not None and canceled.id == task.id and canceled.status == "canceled"
    retried = await store.retry_by_key("k", reset_attempt=True)
    assert retried is not None and retried.id == task.id and retried.status == "queued"


async def test_purge_filters_and_limit(store: TaskStore, database: Database) -> None:
    keep = await store.submit(name="keep")
    old = [await store.submit(name="x", key=f"k{i}") for i in range(5)]
    for task in old:
        await store.cancel(task.id)
    await asyncio.sleep(0.005)
    assert await store.purge(older_than_ms=60_000) == []
    assert await store.purge(status="failed") == []
    assert await store.purge(name="other") == []
    first = await store.purge(limit=2)
    assert len(first) == 2 and set(first) <= {t.id for t in old}
    rest = await store.purge(queue="default", status="canceled", name="x")
    assert set(first) | set(rest) == {t.id for t in old}
    assert database.rows("select count(*) from cairnq_task_keys") == [(0,)]
    assert await store.get(keep.id) is not None


async def test_purge_oldest_first_and_key_cascade(store: TaskStore) -> None:
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


async def test_claim_order_priority_then_due_then_id(store: TaskStore) -> None:
    low = await store.submit(name="x", priority=0)
    high = await store.submit(name="x", priority=5)
    delayed = await store.submit(name="x", priority=9, delay_ms=60_000)
    first = await claim_one(store, lease_ms=5_000)
    second = await claim_one(store)
    assert (first.id, second.id) == (high.id, low.id)
    assert await store.claim(queues=["default"], worker_id=W, limit=10) == []
    assert (await store.get(delayed.id)).status == "queued"  # type: ignore[union-attr]
    assert first.status == "running" and first.attempt == 1 and first.worker_id == W
    assert first.lease_until_ms == first.updated_at_ms + 5_000


@pytest.mark.parametrize(
    ("queues", "names", "expected"),
    [
        (["a"], ["n1"], {"a-n1"}),
        (["a"], None, {"a-n1", "a-n2"}),
        (["a"], ["n1", "n2"], {"a-n1", "a-n2"}),
        (["a", "b"], ["n1"], {"a-n1", "b-n1"}),
        (["a", "b"], None, {"a-n1", "a-n2", "b-n1"}),
        (["a", "b"], ["n2", "zz"], {"a-n2"}),
        (["a", "z"], None, {"a-n1", "a-n2"}),
        (["a"], [], set()),
    ],
)
async def test_claim_variants_filter_by_queue_and_name(
    store: TaskStore, queues: list[str], names: list[str] | None, expected: set[str]
) -> None:
    for queue, name in [("a", "n1"), ("a", "n2"), ("b", "n1"), ("c", "n1")]:
        await store.submit(name=name, queue=queue, payload={"tag": f"{queue}-{name}"})
    claimed = await store.claim(queues=queues, worker_id=W, limit=10, names=names)
    assert {t.payload["tag"] for t in claimed} == expected


async def test_claim_name_filters_leave_the_rest(store: TaskStore) -> None:
    for queue in ("q1", "q2"):
        for name in ("a", "b", "c"):
            await store.submit(name=name, queue=queue)
    assert await store.claim(queues=["q1"], worker_id=W, names=[]) == []
    got = await store.claim(queues=["q1"], worker_id=W, names=["a"], limit=5)
    assert [(t.queue, t.name) for t in got] == [("q1", "a")]
    got = await store.claim(queues=["q1"], worker_id=W, names=["b", "c"], limit=5)
    assert sorted(t.name for t in got) == ["b", "c"]
    got = await store.claim(queues=["q1", "q2"], worker_id=W, names=["a"], limit=5)
    assert [(t.queue, t.name) for t in got] == [("q2", "a")]
    got = await store.claim(queues=["q2", "q3"], worker_id=W, names=None, limit=5)
    assert sorted(t.name for t in got) == ["b", "c"]
    assert await store.claim(queues=["q1", "q2"], worker_id=W, limit=5) == []


async def test_claim_limit_zero_claims_nothing(store: TaskStore) -> None:
    await store.submit(name="x")
    assert await store.claim(queues=["default"], worker_id=W, limit=0) == []
    assert len(await store.claim(queues=["default"], worker_id=W, limit=5)) == 1


async def test_claim_session_draws_share_one_transaction(store: TaskStore) -> None:
    for name in ["a", "a", "b", "b", "c"]:
        await store.submit(name=name)
    seen: list[int] = []

    async def plan(draw: Any) -> list[Task]:
        first = await draw(["a"], 5)
        seen.append(len(first))
        second = await draw(["b", "c"], 4 - len(first))
        nothing = await draw([], 3)
        return first + second + nothing

    claimed = await store.claim_session(
        queues=["default"], worker_id=W, names=["a", "b", "c"], plan=plan
    )
    assert claimed is not None
    assert seen == [2] and len(claimed) == 4
    assert all(t.status == "running" for t in claimed)


async def test_claim_session_one_then_the_rest(store: TaskStore) -> None:
    for name in ("a", "a", "b"):
        await store.submit(name=name)

    async def plan(draw: Any) -> list[list[str]]:
        first = await draw(["a"], 1)
        second = await draw(["a", "b"], 5 - len(first))
        return [[t.name for t in first], sorted(t.name for t in second)]

    value = await store.claim_session(queues=["default"], worker_id=W, names=["a", "b"], plan=plan)
    assert value == [["a"], ["a", "b"]]


async def test_claim_session_plan_error_rolls_back(store: TaskStore) -> None:
    task = await store.submit(name="x")

    async def plan(draw: Any) -> None:
        await draw(None, 1)
        raise RuntimeError("plan failed")

    with pytest.raises(RuntimeError, match="plan failed"):
        await store.claim_session(queues=["default"], worker_id=W, names=None, plan=plan)
    assert (await store.get(task.id)).status == "queued"  # type: ignore[union-attr]
    # The connection is usable again (no transaction left open).
    assert len(await store.claim(queues=["default"], worker_id=W)) == 1


async def test_claim_session_probe_false_skips_plan(store: TaskStore) -> None:
    called = False

    async def plan(draw: Any) -> int:
        nonlocal called
        called = True
        return 1

    assert await store.claim_session(queues=["default"], worker_id=W, names=None, plan=plan) is None
    assert not called


async def test_claim_session_signalled_goes_straight_to_the_transaction(store: TaskStore) -> None:
    # signalled=True (the worker was just woken by a claimable signal) may skip
    # the probe: on an empty queue the transaction finds nothing, and nothing
    # is claimed either way; with a task queued it is claimed as usual.
    async def plan(draw: Any) -> list[Task]:
        return await draw(None, 8)

    empty = await store.claim_session(
        queues=["default"], worker_id=W, names=None, plan=plan, signalled=True
    )
    assert not empty
    task = await store.submit(name="x")
    claimed = await store.claim_session(
        queues=["default"], worker_id=W, names=None, plan=plan, signalled=True
    )
    assert [t.id for t in claimed or []] == [task.id]
    assert (await store.get(task.id)).status == "running"  # type: ignore[union-attr]


async def test_claim_session_single_draw(store: TaskStore) -> None:
    tasks = [await store.submit(name="x") for _ in range(3)]

    async def one(draw: Any) -> list[Task]:
        return await draw(None, 2)

    claimed = await store.claim_session(
        queues=["default"], worker_id=W, names=None, plan=one, single_draw=True
    )
    assert sorted(t.id for t in claimed or []) == sorted(t.id for t in tasks[:2])

    async def two(draw: Any) -> list[Task]:
        first = await draw(None, 1)
        return first + await draw(None, 1)

    if not store.capabilities.single_draw_commits:
        # The hint is ignored where the COMMIT does not travel with the draw.
        again = await store.claim_session(
            queues=["default"], worker_id=W, names=None, plan=two, single_draw=True
        )
        assert [t.id for t in again or []] == [tasks[2].id]
        return
    with pytest.raises(RuntimeError, match="more than once"):
        await store.claim_session(
            queues=["default"], worker_id=W, names=None, plan=two, single_draw=True
        )
    # The first draw committed with its statement: the row is claimed, and
    # lease recovery brings it back; the connection is clean for the next claim.
    assert (await store.get(tasks[2].id)).status == "running"  # type: ignore[union-attr]
    assert await store.claim(queues=["default"], worker_id=W) == []


async def test_claim_session_single_draw_plan_error_rolls_back(store: TaskStore) -> None:
    task = await store.submit(name="x")

    async def plan(draw: Any) -> None:
        raise ValueError("before any draw")

    for signalled in (False, True):
        with pytest.raises(ValueError, match="before any draw"):
            await store.claim_session(
                queues=["default"],
                worker_id=W,
                names=None,
                plan=plan,
                signalled=signalled,
                single_draw=True,
            )
    assert (await store.get(task.id)).status == "queued"  # type: ignore[union-attr]
    assert [t.id for t in await store.claim(queues=["default"], worker_id=W)] == [task.id]


# -- owned writes ----------------------------------------------------------------------------


async def test_complete_fail_and_cancel_wins(store: TaskStore) -> None:
    await store.submit(name="x")
    t = await claim_one(store)
    await store.progress(task_id=t.id, worker_id=W, progress=0.5, message="half")
    kept = await store.progress(task_id=t.id, worker_id=W, progress=None, message=None)
    assert (kept.progress, kept.message) == (0.5, "half")
    done = await store.complete(task_id=t.id, worker_id=W, result={"ok": True})
    assert (done.status, done.result, done.progress, done.lease_until_ms) == (
        "succeeded",
        {"ok": True},
        1.0,
        None,
    )
    assert done.completed_at_ms is not None and done.worker_id == W

    await store.submit(name="y")
    t = await claim_one(store)
    await store.progress(task_id=t.id, worker_id=W, progress=0.25)
    flagged = await store.cancel(t.id)
    assert flagged is not None and flagged.status == "running" and flagged.cancel_requested
    ended = await store.complete(task_id=t.id, worker_id=W, result={"dropped": 1})
    assert (ended.status, ended.result, ended.progress) == ("canceled", None, 0.25)

    await store.submit(name="z")
    t = await claim_one(store)
    await store.cancel(t.id)
    failed = await store.fail(task_id=t.id, worker_id=W, error=ERROR, retryable=True)
    assert failed.status == "canceled" and failed.error == ERROR


async def test_complete_succeed_and_cancel_wins(store: TaskStore) -> None:
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


async def test_succeed_ignores_cancel(store: TaskStore) -> None:
    await store.submit(name="x")
    t = await claim_one(store)
    await store.cancel(t.id)
    done = await store.succeed(task_id=t.id, worker_id=W, result=[1])
    assert (done.status, done.result, done.progress) == ("succeeded", [1], 1.0)


async def test_progress_coalesces(store: TaskStore) -> None:
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


async def test_fail_requeues_then_fails_for_good(store: TaskStore) -> None:
    task = await store.submit(name="x", max_attempts=2)
    error = {**ERROR, "message": "boom"}
    t = await claim_one(store)
    await store.progress(task_id=t.id, worker_id=W, progress=0.3, message="m")
    again = await store.fail(task_id=t.id, worker_id=W, error=error, delay_ms=0)
    assert (again.status, again.worker_id, again.progress, again.message) == (
        "queued",
        None,
        None,
        None,
    )
    assert again.error == error and again.completed_at_ms is None and again.lease_until_ms is None
    t = await claim_one(store)
    assert t.attempt == 2
    final = await store.fail(task_id=t.id, worker_id=W, error=error)
    assert final.status == "failed" and final.worker_id == W and final.completed_at_ms is not None
    assert final.id == task.id


async def test_fail_branches(store: TaskStore) -> None:
    for _ in range(3):
        await store.submit(name="n", max_attempts=2)
    a, b, c = await store.claim(queues=["default"], worker_id=W, limit=3)

    await store.progress(task_id=a.id, worker_id=W, progress=0.4, message="x")
    requeued = await store.fail(task_id=a.id, worker_id=W, error=ERROR, delay_ms=30_000)
    assert (requeued.status, requeued.worker_id, requeued.error) == ("queued", None, ERROR)
    assert requeued.run_at_ms == requeued.updated_at_ms + 30_000
    assert (requeued.progress, requeued.message, requeued.completed_at_ms) == (None, None, None)

    permanent = await store.fail(task_id=b.id, worker_id=W, error=ERROR, retryable=False)
    assert (permanent.status, permanent.worker_id) == ("failed", W)
    assert permanent.completed_at_ms is not None and permanent.lease_until_ms is None

    await store.cancel(c.id)
    canceled = await store.fail(task_id=c.id, worker_id=W, error=ERROR)
    assert (canceled.status, canceled.error) == ("canceled", ERROR)


async def test_unserialisable_error_envelope_is_reduced(store: TaskStore) -> None:
    await store.submit(name="x")
    t = await claim_one(store)
    bad = {"type": "Boom", "code": "c", "message": "m", "details": {"x": float("nan")}}
    failed = await store.fail(task_id=t.id, worker_id=W, error=bad, retryable=False)
    assert failed.error == {
        "type": "Boom",
        "code": "c",
        "message": "m",
        "retryable": False,
        "details": {},
    }
    # At max attempts, with a set inside and a NUL in the message.
    await store.submit(name="n", max_attempts=1)
    task = await claim_one(store)
    failed = await store.fail(
        task_id=task.id, worker_id=W, error={"type": "T", "message": "a\x00b", "x": {1, 2}}
    )
    assert failed.status == "failed"
    assert failed.error is not None and failed.error["type"] == "T"
    assert failed.error["retryable"] is True and failed.error["details"] == {}


async def test_ownership_failures_raise_lost_lease(store: TaskStore) -> None:
    await store.submit(name="x")
    t = await claim_one(store)
    calls = [
        store.heartbeat(task_id=t.id, worker_id="worker_other"),
        store.progress(task_id=t.id, worker_id="worker_other", progress=0.1),
        store.succeed(task_id=t.id, worker_id="worker_other"),
        store.complete(task_id=t.id, worker_id="worker_other"),
        store.fail(task_id=t.id, worker_id="worker_other", error=ERROR),
        store.heartbeat(task_id="task_missing", worker_id=W),
        store.progress(task_id="task_missing", worker_id=W, progress=0.1),
    ]
    for call in calls:
        with pytest.raises(LostLease) as info:
            await call
        assert info.value.task_id in (t.id, "task_missing")
    assert (await store.get(t.id)).status == "running"  # type: ignore[union-attr]


async def test_expired_lease_is_not_owned(store: TaskStore) -> None:
    await store.submit(name="x")
    await store.submit(name="y")
    t = await expire(store, names=["x"])
    with pytest.raises(LostLease):
        await store.heartbeat(task_id=t.id, worker_id=W)
    assert await store.heartbeat_batch(task_ids=[t.id], worker_id=W) == {}
    u = await expire(store, names=["y"])
    with pytest.raises(LostLease):
        await store.complete(task_id=u.id, worker_id=W)


async def test_heartbeat_extends_a_lease(store: TaskStore) -> None:
    await store.submit(name="n")
    task = await claim_one(store, lease_ms=1_000)
    beat = await store.heartbeat(task_id=task.id, worker_id=W, lease_ms=60_000)
    assert beat.lease_until_ms is not None and beat.lease_until_ms >= beat.updated_at_ms + 60_000
    with pytest.raises(LostLease) as info:
        await store.heartbeat(task_id=task.id, worker_id="worker_B")
    assert info.value.task_id == task.id


async def test_heartbeat_batch_per_row_ownership_in_given_order(store: TaskStore) -> None:
    for _ in range(3):
        await store.submit(name="x")
    claimed = await store.claim(queues=["default"], worker_id=W, limit=3)
    a, b, c = sorted(claimed, key=lambda t: t.id)
    await store.cancel(b.id)
    await store.complete(task_id=c.id, worker_id=W)
    result = await store.heartbeat_batch(task_ids=[c.id, b.id, "task_x", a.id], worker_id=W)
    assert list(result.items()) == [(b.id, True), (a.id, False)]
    result = await store.heartbeat_batch(task_ids=[a.id, b.id], worker_id=W)
    assert list(result.items()) == [(a.id, False), (b.id, True)]
    assert await store.heartbeat_batch(task_ids=[], worker_id=W) == {}


async def test_recovery_requeues_fails_or_cancels(store: TaskStore) -> None:
    requeue = await store.submit(name="r", max_attempts=3)
    exhaust = await store.submit(name="e", max_attempts=1)
    cancel = await store.submit(name="c", max_attempts=3)
    claimed = await store.claim(queues=["default"], worker_id=W, limit=3, lease_ms=150)
    assert len(claimed) == 3
    await store.progress(task_id=requeue.id, worker_id=W, progress=0.5)
    await store.progress(task_id=exhaust.id, worker_id=W, progress=0.5)
    await store.cancel(cancel.id)
    signals: list[WatchSignal] = []
    store.watch(signals.append)
    await asyncio.sleep(0.2)
    # Recovery runs inside the next claim, for every queue and name.
    assert await store.claim(queues=["elsewhere"], worker_id=W) == []
    r, e, c = [await store.get(t.id) for t in (requeue, exhaust, cancel)]
    assert r is not None and e is not None and c is not None
    assert (r.status, r.worker_id, r.progress, r.lease_until_ms, r.completed_at_ms) == (
        "queued",
        None,
        None,
        None,
        None,
    )
    assert r.run_at_ms == r.updated_at_ms
    assert e.status == "failed" and e.worker_id == W and e.progress == 0.5
    assert e.completed_at_ms is not None
    assert e.error == {
        "type": "LeaseExpired",
        "code": "lease_expired",
        "message": "task lease expired and max attempts reached",
        "retryable": False,
        "details": {},
    }
    assert c.status == "canceled" and c.completed_at_ms is not None and c.lease_until_ms is None

    # Postgres hands signals over from its LISTEN connection, after the claim returns.
    def done_ids() -> set[str | None]:
        return {s.task_id for s in signals if s.reason == "done"}

    await eventually(
        lambda: (
            WatchSignal("queued", queue="default") in signals
            and done_ids() >= {exhaust.id, cancel.id}
        )
    )
    # The channels are database-wide: other schemas' tasks may signal too.
    assert done_ids() & {requeue.id, exhaust.id, cancel.id} == {exhaust.id, cancel.id}


async def test_recovery_keeps_previous_error(store: TaskStore) -> None:
    await store.submit(name="n", max_attempts=3)
    first = await claim_one(store)
    await store.fail(task_id=first.id, worker_id=W, error={"type": "E1"})
    await expire(store)
    await store.claim(queues=["default"], worker_id=W, limit=0)  # no statement at all
    await store.claim(queues=["nothing"], worker_id=W)  # probe + recover
    task = await store.get(first.id)
    assert task is not None and task.status == "queued" and task.error is not None
    assert task.error["type"] == "E1" and task.attempt == 2


async def test_signals_for_submit_fail_and_retry(store: TaskStore) -> None:
    signals: list[WatchSignal] = []
    store.watch(signals.append)
    task = await store.submit(name="x", queue="q")
    claimed = await store.claim(queues=["q"], worker_id=W)
    error = {**ERROR, "retryable": False}
    await store.fail(task_id=claimed[0].id, worker_id=W, error=error, retryable=False)
    await store.retry(task.id)
    expected = [
        WatchSignal("queued", queue="q"),
        WatchSignal("done", task_id=task.id),
        WatchSignal("queued", queue="q"),
    ]
    # This process's own writes, in order; Postgres may deliver the same
    # signals again as they come back through NOTIFY.
    remaining = iter(signals)
    assert all(any(seen == wanted for seen in remaining) for wanted in expected), signals
    # NOTIFY channels are database-wide, so other schemas' signals may come too.
    ours = {s for s in signals if s.task_id in (None, task.id) and s.queue in (None, "q")}
    assert ours == set(expected)
    if store.dialect == "sqlite":
        assert signals == expected
