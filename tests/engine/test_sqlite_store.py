"""SQLiteStore: every operation and state transition against a real database file."""

from __future__ import annotations

import asyncio
import re
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from engine import (
    AlreadyExists,
    LostLease,
    SQLiteStore,
    StoreClosed,
    Task,
    TaskRef,
    WatchSignal,
)

W = "worker_test"


@pytest.fixture
async def store(sqlite_path: Path) -> AsyncIterator[SQLiteStore]:
    s = SQLiteStore(sqlite_path)
    await s.connect()
    yield s
    await s.close()


def rows(path: Path, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Read the file with a separate stdlib connection (what another process sees)."""
    with sqlite3.connect(path) as conn:
        return conn.execute(sql, params).fetchall()


async def claim_one(store: SQLiteStore, **kwargs: Any) -> Task:
    claimed = await store.claim(queues=["default"], worker_id=W, **kwargs)
    assert len(claimed) == 1
    return claimed[0]


async def test_submit_returns_what_get_reads(store: SQLiteStore) -> None:
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
    assert await store.get("task_missing") is None
    assert await store.get_status("task_missing") is None


async def test_payload_none_is_empty_object_and_result_none_is_sql_null(
    store: SQLiteStore, sqlite_path: Path
) -> None:
    task = await store.submit(name="x")
    assert task.payload == {} and task.metadata == {}
    claimed = await claim_one(store)
    await store.complete(task_id=claimed.id, worker_id=W, result=None)
    assert rows(
        sqlite_path, "select payload, result from cairnq_tasks where id = ?", (task.id,)
    ) == [("{}", None)]


async def test_claim_order_priority_then_due_then_id(store: SQLiteStore) -> None:
    low = await store.submit(name="x", priority=0)
    high = await store.submit(name="x", priority=5)
    delayed = await store.submit(name="x", priority=9, delay_ms=60_000)
    first = await claim_one(store)
    second = await claim_one(store)
    assert (first.id, second.id) == (high.id, low.id)
    assert await store.claim(queues=["default"], worker_id=W) == []
    assert (await store.get(delayed.id)).status == "queued"  # type: ignore[union-attr]
    assert first.status == "running" and first.attempt == 1 and first.worker_id == W
    assert first.lease_until_ms is not None and first.lease_until_ms > first.updated_at_ms


@pytest.mark.parametrize(
    ("queues", "names", "expected"),
    [
        (["a"], ["n1"], {"a-n1"}),
        (["a"], None, {"a-n1", "a-n2"}),
        (["a"], ["n1", "n2"], {"a-n1", "a-n2"}),
        (["a", "b"], ["n1"], {"a-n1", "b-n1"}),
        (["a", "b"], None, {"a-n1", "a-n2", "b-n1"}),
        (["a", "b"], ["n2", "zz"], {"a-n2"}),
        (["a"], [], set()),
    ],
)
async def test_claim_variants_filter_by_queue_and_name(
    store: SQLiteStore, queues: list[str], names: list[str] | None, expected: set[str]
) -> None:
    for queue, name in [("a", "n1"), ("a", "n2"), ("b", "n1"), ("c", "n1")]:
        await store.submit(name=name, queue=queue, payload={"tag": f"{queue}-{name}"})
    claimed = await store.claim(queues=queues, worker_id=W, limit=10, names=names)
    assert {t.payload["tag"] for t in claimed} == expected


async def test_claim_limit_zero_claims_nothing(store: SQLiteStore) -> None:
    await store.submit(name="x")
    assert await store.claim(queues=["default"], worker_id=W, limit=0) == []
    assert len(await store.claim(queues=["default"], worker_id=W, limit=5)) == 1


async def test_claim_session_draws_share_one_transaction(store: SQLiteStore) -> None:
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


async def test_claim_session_plan_error_rolls_back(store: SQLiteStore) -> None:
    task = await store.submit(name="x")

    async def plan(draw: Any) -> None:
        await draw(None, 1)
        raise RuntimeError("plan failed")

    with pytest.raises(RuntimeError, match="plan failed"):
        await store.claim_session(queues=["default"], worker_id=W, names=None, plan=plan)
    assert (await store.get(task.id)).status == "queued"  # type: ignore[union-attr]
    # The connection is usable again (no transaction left open).
    assert len(await store.claim(queues=["default"], worker_id=W)) == 1


async def test_claim_session_probe_false_skips_plan(store: SQLiteStore) -> None:
    called = False

    async def plan(draw: Any) -> int:
        nonlocal called
        called = True
        return 1

    assert await store.claim_session(queues=["default"], worker_id=W, names=None, plan=plan) is None
    assert not called


async def test_complete_fail_and_cancel_wins(store: SQLiteStore) -> None:
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
    error = {"type": "E", "code": "c", "message": "m", "retryable": True, "details": {}}
    failed = await store.fail(task_id=t.id, worker_id=W, error=error, retryable=True)
    assert failed.status == "canceled" and failed.error == error


async def test_fail_requeues_then_fails_for_good(store: SQLiteStore) -> None:
    task = await store.submit(name="x", max_attempts=2)
    error = {"type": "E", "code": "c", "message": "boom", "retryable": True, "details": {}}
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


async def test_fail_delay_and_permanent(store: SQLiteStore) -> None:
    await store.submit(name="x")
    error = {"type": "E", "code": "c", "message": "m", "retryable": False, "details": {}}
    t = await claim_one(store)
    later = await store.fail(task_id=t.id, worker_id=W, error=error, delay_ms=50_000)
    assert later.status == "queued" and later.run_at_ms >= later.updated_at_ms + 50_000
    await store.submit(name="y")
    t = await claim_one(store)
    final = await store.fail(task_id=t.id, worker_id=W, error=error, retryable=False)
    assert final.status == "failed"


async def test_unserialisable_error_is_reduced(store: SQLiteStore) -> None:
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


async def test_succeed_ignores_cancel(store: SQLiteStore) -> None:
    await store.submit(name="x")
    t = await claim_one(store)
    await store.cancel(t.id)
    done = await store.succeed(task_id=t.id, worker_id=W, result=[1])
    assert (done.status, done.result, done.progress) == ("succeeded", [1], 1.0)


async def test_ownership_failures_raise_lost_lease(store: SQLiteStore) -> None:
    await store.submit(name="x")
    t = await claim_one(store)
    error = {"type": "E", "code": "c", "message": "m", "retryable": True, "details": {}}
    calls = [
        store.heartbeat(task_id=t.id, worker_id="worker_other"),
        store.progress(task_id=t.id, worker_id="worker_other", progress=0.1),
        store.succeed(task_id=t.id, worker_id="worker_other"),
        store.complete(task_id=t.id, worker_id="worker_other"),
        store.fail(task_id=t.id, worker_id="worker_other", error=error),
        store.heartbeat(task_id="task_missing", worker_id=W),
    ]
    for call in calls:
        with pytest.raises(LostLease) as info:
            await call
        assert info.value.task_id in (t.id, "task_missing")
    assert (await store.get(t.id)).status == "running"  # type: ignore[union-attr]


async def test_expired_lease_is_not_owned(store: SQLiteStore) -> None:
    await store.submit(name="x")
    t = await claim_one(store, lease_ms=1)
    await asyncio.sleep(0.01)
    with pytest.raises(LostLease):
        await store.heartbeat(task_id=t.id, worker_id=W)
    assert await store.heartbeat_batch(task_ids=[t.id], worker_id=W) == {}


async def test_heartbeat_extends_and_batch_reports_in_order(store: SQLiteStore) -> None:
    for _ in range(3):
        await store.submit(name="x")
    claimed = await store.claim(queues=["default"], worker_id=W, limit=3)
    a, b, c = sorted(claimed, key=lambda t: t.id)
    beat = await store.heartbeat(task_id=a.id, worker_id=W, lease_ms=90_000)
    assert beat.lease_until_ms is not None and beat.lease_until_ms >= beat.updated_at_ms + 90_000
    await store.cancel(b.id)
    await store.complete(task_id=c.id, worker_id=W)
    result = await store.heartbeat_batch(task_ids=[c.id, b.id, "task_x", a.id], worker_id=W)
    assert list(result.items()) == [(b.id, True), (a.id, False)]
    assert await store.heartbeat_batch(task_ids=[], worker_id=W) == {}


async def test_recovery_requeues_fails_or_cancels(store: SQLiteStore) -> None:
    requeue = await store.submit(name="r", max_attempts=3)
    exhaust = await store.submit(name="e", max_attempts=1)
    cancel = await store.submit(name="c", max_attempts=3)
    claimed = await store.claim(queues=["default"], worker_id=W, limit=3, lease_ms=150)
    assert len(claimed) == 3
    await store.progress(task_id=requeue.id, worker_id=W, progress=0.5)
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
    assert e.status == "failed" and e.error is not None and e.error["code"] == "lease_expired"
    assert e.error == {
        "type": "LeaseExpired",
        "code": "lease_expired",
        "message": "task lease expired and max attempts reached",
        "retryable": False,
        "details": {},
    }
    assert c.status == "canceled" and c.completed_at_ms is not None
    assert WatchSignal("queued", queue="default") in signals
    assert {s.task_id for s in signals if s.reason == "done"} == {exhaust.id, cancel.id}


async def test_cancel_and_retry(store: SQLiteStore) -> None:
    task = await store.submit(name="x")
    canceled = await store.cancel(task.id)
    assert canceled is not None and canceled.status == "canceled"
    assert canceled.completed_at_ms is not None
    assert await store.cancel(task.id) is None
    assert await store.cancel("task_missing") is None
    again = await store.retry(task.id)
    assert again is not None and again.status == "queued" and again.completed_at_ms is None
    assert await store.retry(task.id) is None  # queued: nothing to retry
    t = await claim_one(store)
    done = await store.complete(task_id=t.id, worker_id=W, result=7)
    assert await store.retry(done.id) is None  # succeeded is never retried

    await store.submit(name="y", max_attempts=1)
    t = await claim_one(store)
    error = {"type": "E", "code": "c", "message": "m", "retryable": True, "details": {}}
    await store.fail(task_id=t.id, worker_id=W, error=error)
    kept = await store.retry(t.id)
    assert kept is not None and kept.attempt == 1 and kept.error is None and kept.worker_id is None
    t = await claim_one(store)
    await store.fail(task_id=t.id, worker_id=W, error=error)
    reset = await store.retry(t.id, reset_attempt=True)
    assert reset is not None and reset.attempt == 0


async def test_keyed_reuse(store: SQLiteStore) -> None:
    first = await store.submit(name="x", key="k")
    assert (await store.submit(name="x", key="k")).id == first.id
    t = await claim_one(store)
    assert (await store.submit(name="x", key="k")).id == first.id  # running is live
    await store.complete(task_id=t.id, worker_id=W, result=1)
    fresh = await store.submit(name="x", key="k")
    assert fresh.id != first.id
    assert (await store.get_by_key("k")) == fresh
    assert await store.get_status_by_key("k") == TaskRef(fresh.id, "queued")


async def test_keyed_reuse_succeeded(store: SQLiteStore) -> None:
    first = await store.submit(name="x", key="k", conflict="reuse-succeeded")
    t = await claim_one(store)
    await store.complete(task_id=t.id, worker_id=W, result={"r": 1})
    again = await store.submit(name="x", key="k", conflict="reuse-succeeded")
    assert again.id == first.id and again.result == {"r": 1}
    await asyncio.sleep(0.005)  # purge's cutoff is strict: let the clock move
    await store.purge()
    replaced = await store.submit(name="x", key="k", conflict="reuse-succeeded")
    assert replaced.id != first.id  # a purged task frees its key


async def test_keyed_failed_and_canceled_are_never_handed_out(store: SQLiteStore) -> None:
    for conflict in ("reuse", "reuse-succeeded"):
        first = await store.submit(name="x", key=f"k-{conflict}", conflict=conflict)  # type: ignore[arg-type]
        await store.cancel(first.id)
        second = await store.submit(name="x", key=f"k-{conflict}", conflict=conflict)  # type: ignore[arg-type]
        assert second.id != first.id


async def test_keyed_reject(store: SQLiteStore, sqlite_path: Path) -> None:
    first = await store.submit(name="x", key="k", conflict="reject")
    await store.cancel(first.id)
    with pytest.raises(AlreadyExists) as info:
        await store.submit(name="x", key="k", conflict="reject")
    assert info.value.key == "k" and info.value.task_id == first.id
    assert rows(sqlite_path, "select count(*) from cairnq_tasks") == [(1,)]
    await asyncio.sleep(0.005)  # purge's cutoff is strict: let the clock move
    await store.purge()
    assert (await store.submit(name="x", key="k", conflict="reject")).id != first.id


async def test_keyed_replace_cancels_live_only(store: SQLiteStore) -> None:
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


async def test_cancel_and_retry_by_key(store: SQLiteStore) -> None:
    assert await store.cancel_by_key("nope") is None
    assert await store.retry_by_key("nope") is None
    task = await store.submit(name="x", key="k")
    canceled = await store.cancel_by_key("k")
    assert canceled is not None and canceled.id == task.id and canceled.status == "canceled"
    retried = await store.retry_by_key("k", reset_attempt=True)
    assert retried is not None and retried.status == "queued"


async def test_list_filters_order_and_paging(store: SQLiteStore) -> None:
    # Newest first by created_at_ms; ids only break ties inside one millisecond.
    parent = await store.submit(name="p", queue="q1", correlation_id="c1")
    await asyncio.sleep(0.002)
    child = await store.submit(
        name="c", queue="q2", parent_id=parent.id, root_id=parent.id, correlation_id="c1"
    )
    await asyncio.sleep(0.002)
    other = await store.submit(name="c", queue="q1")
    assert [t.id for t in await store.list()] == [other.id, child.id, parent.id]
    assert [t.id for t in await store.list(root_id=parent.id)] == [child.id, parent.id]
    assert [t.id for t in await store.list(correlation_id="c1", name="c")] == [child.id]
    assert [t.id for t in await store.list(queue="q1", status="queued")] == [other.id, parent.id]
    assert [t.id for t in await store.list(limit=1, offset=1)] == [child.id]
    assert await store.list(status="failed") == []
    assert await store.list(limit=0) == []


async def test_stats_and_queue_depth(store: SQLiteStore) -> None:
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


async def test_purge(store: SQLiteStore, sqlite_path: Path) -> None:
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
    assert rows(sqlite_path, "select count(*) from cairnq_task_keys") == [(0,)]
    assert await store.get(keep.id) is not None


async def test_protocol_version_and_read_statement(store: SQLiteStore) -> None:
    assert await store.protocol_version() == 1
    task = await store.submit(name="x")
    found = await store.read_statement("get", {"id": task.id})
    assert len(found) == 1 and found[0]["id"] == task.id and found[0]["status"] == "queued"
    stats = await store.read_statement("stats", {"queue": None})
    assert stats == [{"queue": "default", "status": "queued", "n": 1}]
    with pytest.raises(ValueError, match="not a read"):
        await store.read_statement("cancel", {"id": task.id, "now_ms": 0})
    with pytest.raises(ValueError):
        await store.read_statement("../etc", {})
    with pytest.raises(ValueError):
        await store.read_statement("no_such_statement", {})


async def test_signals_for_submit_fail_and_retry(store: SQLiteStore) -> None:
    signals: list[WatchSignal] = []
    store.watch(signals.append)
    task = await store.submit(name="x", queue="q")
    claimed = await store.claim(queues=["q"], worker_id=W)
    error = {"type": "E", "code": "c", "message": "m", "retryable": False, "details": {}}
    await store.fail(task_id=claimed[0].id, worker_id=W, error=error, retryable=False)
    await store.retry(task.id)
    assert signals == [
        WatchSignal("queued", queue="q"),
        WatchSignal("done", task_id=task.id),
        WatchSignal("queued", queue="q"),
    ]


async def test_two_handles_on_one_file_share_data_and_signals(sqlite_path: Path) -> None:
    a, b = SQLiteStore(sqlite_path), SQLiteStore(str(sqlite_path))
    await a.connect()
    await b.connect()
    try:
        assert a.signals is b.signals
        woke = asyncio.ensure_future(b.claim_wake(["default"], 5_000))
        await asyncio.sleep(0)
        task = await a.submit(name="x")
        assert await woke is True
        claimed = await b.claim(queues=["default"], worker_id=W)
        assert [t.id for t in claimed] == [task.id]
        assert (await a.get(task.id)).status == "running"  # type: ignore[union-attr]
    finally:
        await a.close()
        await b.close()


async def test_memory_handles_are_separate_and_final() -> None:
    a, b = SQLiteStore(":memory:"), SQLiteStore(":memory:")
    await a.connect()
    await b.connect()
    task = await a.submit(name="x")
    assert await a.get(task.id) == task
    assert await b.get(task.id) is None
    assert a.signals is not b.signals
    await a.close()
    await b.close()
    with pytest.raises(StoreClosed):
        await a.get(task.id)
    with pytest.raises(StoreClosed):
        await a.connect()


async def test_operations_connect_lazily(sqlite_path: Path) -> None:
    store = SQLiteStore(sqlite_path)
    try:
        task = await store.submit(name="x")
        assert await store.get(task.id) == task
    finally:
        await store.close()


async def test_task_ids_are_ulids_ordered_by_millisecond(store: SQLiteStore) -> None:
    first = await store.submit(name="x")
    await asyncio.sleep(0.002)
    batch = await asyncio.gather(*(store.submit(name="x") for _ in range(200)))
    pattern = re.compile(r"^task_[0-7][0-9A-HJKMNP-TV-Z]{25}$")
    ids = [first.id, *(t.id for t in batch)]
    assert all(pattern.match(i) for i in ids) and len(set(ids)) == len(ids)
    assert all(first.id < t.id for t in batch)  # a later millisecond sorts later
