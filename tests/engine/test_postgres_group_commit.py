"""PostgresStore group commit: settlements and submits arriving together share one
transaction, and every caller gets exactly the outcome it would have had alone.

Each test runs in its own throwaway schema on the real server.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
import pytest

from engine import LostLease, PostgresStore, Task
from engine.store._base import insert_params

W = "worker_A"
OTHER = "worker_B"
ERROR = {"type": "E", "code": "boom", "message": "m", "retryable": True, "details": {}}


@pytest.fixture
def store(pg_store: PostgresStore) -> PostgresStore:
    return pg_store


Step = Callable[[], Awaitable[Task]]


async def _claimed(store: PostgresStore, queue: str, worker: str, lease_ms: int) -> Task:
    await store.submit(name="job", queue=queue, payload={"q": queue})
    (task,) = await store.claim(queues=[queue], worker_id=worker, lease_ms=lease_ms)
    return task


async def _mixed_steps(store: PostgresStore, tag: str) -> tuple[list[str], list[Step]]:
    """Running tasks in every situation a settle can meet, and the settle for each."""
    plain = await _claimed(store, f"{tag}-plain", W, 30_000)
    canceled = await _claimed(store, f"{tag}-cancel", W, 30_000)
    await store.cancel(canceled.id)  # cancel wins over the completion below
    stolen = await _claimed(store, f"{tag}-stolen", OTHER, 30_000)
    retry = await _claimed(store, f"{tag}-retry", W, 30_000)
    final = await _claimed(store, f"{tag}-final", W, 30_000)
    noted = await _claimed(store, f"{tag}-progress", W, 30_000)
    expired = await _claimed(store, f"{tag}-expired", W, 1)
    await asyncio.sleep(0.02)
    steps: list[Step] = [
        lambda: store.complete(task_id=plain.id, worker_id=W, result={"n": 1}),
        lambda: store.complete(task_id=canceled.id, worker_id=W, result={"n": 2}),
        lambda: store.complete(task_id=stolen.id, worker_id=W, result={"n": 3}),
        lambda: store.fail(task_id=retry.id, worker_id=W, error=ERROR, delay_ms=5_000),
        lambda: store.fail(task_id=final.id, worker_id=W, error=ERROR, retryable=False),
        lambda: store.progress(task_id=noted.id, worker_id=W, progress=0.5, message="half"),
        lambda: store.complete(task_id=expired.id, worker_id=W, result={"n": 4}),
    ]
    ids = [plain.id, canceled.id, stolen.id, retry.id, final.id, noted.id, expired.id]
    return ids, steps


def _shape(outcome: Task | BaseException) -> tuple[Any, ...]:
    if isinstance(outcome, BaseException):
        return (type(outcome).__name__,)
    error = outcome.error["code"] if outcome.error else None
    return (outcome.status, outcome.result, error, outcome.progress, outcome.message)


async def test_concurrent_settles_share_one_transaction_with_individual_outcomes(
    store: PostgresStore,
) -> None:
    alone_ids, alone_steps = await _mixed_steps(store, "alone")
    alone = []
    for step in alone_steps:  # one at a time: each is its own autocommit statement
        try:
            alone.append(await step())
        except LostLease as exc:
            alone.append(exc)
    grouped_ids, grouped_steps = await _mixed_steps(store, "grouped")
    grouped = await asyncio.gather(*(step() for step in grouped_steps), return_exceptions=True)

    assert [_shape(o) for o in grouped] == [_shape(o) for o in alone]
    assert [_shape(o) for o in alone] == [
        ("succeeded", {"n": 1}, None, 1.0, None),
        ("canceled", None, None, None, None),
        ("LostLease",),
        ("queued", None, "boom", None, None),
        ("failed", None, "boom", None, None),
        ("running", None, None, 0.5, "half"),
        ("LostLease",),
    ]
    # What the database holds agrees with what the callers were told (the
    # expired task is left out: a later claim's recovery may have requeued it).
    for ids in (alone_ids, grouped_ids):
        stored = [await store.get(i) for i in ids[:-1]]
        assert [t.status for t in stored if t is not None] == [
            "succeeded", "canceled", "running", "queued", "failed", "running"
        ]  # fmt: skip
    # One transaction: the database clock (now()) is the same for every row it wrote.
    written = [t for t in grouped if isinstance(t, Task)]
    assert len({t.updated_at_ms for t in written}) == 1


async def test_a_failing_statement_fails_only_its_caller(
    store: PostgresStore, pg_dsn: str, pg_schema: str
) -> None:
    ids, steps = await _mixed_steps(store, "mixed")
    doomed = await _claimed(store, "doomed", W, 30_000)
    # The server refuses this one statement (a trigger: values the client can
    # see are bad never get this far), which aborts the shared transaction; the
    # others are then written one by one.
    with psycopg.connect(pg_dsn, autocommit=True, options=f"-c search_path={pg_schema}") as conn:
        conn.execute(
            "create function refuse() returns trigger language plpgsql as $$ begin "
            "if new.error->>'message' = 'refuse me' then raise exception 'refused'; end if; "
            "return new; end $$"
        )
        conn.execute(
            "create trigger refuse before update on cairnq_tasks "
            "for each row execute function refuse()"
        )
    refused = {**ERROR, "message": "refuse me"}
    bad = store.fail(task_id=doomed.id, worker_id=W, error=refused)
    outcomes = await asyncio.gather(bad, *(step() for step in steps), return_exceptions=True)
    assert isinstance(outcomes[0], psycopg.errors.RaiseException)
    assert [_shape(o) for o in outcomes[1:]] == [
        ("succeeded", {"n": 1}, None, 1.0, None),
        ("canceled", None, None, None, None),
        ("LostLease",),
        ("queued", None, "boom", None, None),
        ("failed", None, "boom", None, None),
        ("running", None, None, 0.5, "half"),
        ("LostLease",),
    ]
    still = await store.get(doomed.id)
    assert still is not None and still.status == "running" and still.error is None
    assert [t.status for t in [await store.get(i) for i in ids] if t is not None][:2] == [
        "succeeded",
        "canceled",
    ]


async def test_concurrent_submits_are_grouped_and_each_is_answered(store: PostgresStore) -> None:
    tasks = await asyncio.gather(
        *(store.submit(name="job", queue="burst", payload={"i": i}) for i in range(40))
    )
    assert [t.payload for t in tasks] == [{"i": i} for i in range(40)]
    stored = [await store.get(t.id) for t in tasks]
    assert stored == list(tasks)
    assert (await store.stats(queue="burst"))["burst"]["queued"] == 40


# -- submits: one multi-row insert per group ---------------------------------------------------


async def test_concurrent_submits_share_one_insert_and_each_gets_its_own_row(
    store: PostgresStore,
) -> None:
    parent = await store.submit(name="parent", queue="tree")
    shapes: list[dict[str, Any]] = [
        {"name": "plain"},
        {"name": "prio", "priority": 7, "max_attempts": 9},
        {"name": "late", "delay_ms": 60_000},
        {"name": "child", "parent_id": parent.id, "root_id": parent.id},
        {"name": "noted", "metadata": {"m": [1, None]}, "correlation_id": "c-1"},
        {"name": "other-queue", "queue": "elsewhere", "payload": {"deep": {"x": "y"}}},
    ] * 5
    tasks = await asyncio.gather(*(store.submit(**shape) for shape in shapes))
    # One statement: the clock was read once for every row of the burst.
    assert len({t.created_at_ms for t in tasks}) == 1
    assert len({t.id for t in tasks}) == len(shapes)
    for shape, task in zip(shapes, tasks, strict=True):
        assert task.name == shape["name"]
        assert task.status == "queued"
        assert task.queue == shape.get("queue", "default")
        assert task.payload == shape.get("payload", {})
        assert task.metadata == shape.get("metadata", {})
        assert task.priority == shape.get("priority", 0)
        assert task.max_attempts == shape.get("max_attempts", 3)
        assert task.parent_id == shape.get("parent_id")
        assert task.root_id == shape.get("root_id", task.id)
        assert task.correlation_id == shape.get("correlation_id")
        assert task.run_at_ms == task.created_at_ms + shape.get("delay_ms", 0)
        assert await store.get(task.id) == task


async def test_submits_and_settles_in_one_group_each_get_their_outcome(
    store: PostgresStore,
) -> None:
    _, steps = await _mixed_steps(store, "with-submits")
    submits = [store.submit(name="new", queue="fresh", payload={"i": i}) for i in range(6)]
    outcomes = await asyncio.gather(*(step() for step in steps), *submits, return_exceptions=True)
    assert [_shape(o) for o in outcomes[: len(steps)]] == [
        ("succeeded", {"n": 1}, None, 1.0, None),
        ("canceled", None, None, None, None),
        ("LostLease",),
        ("queued", None, "boom", None, None),
        ("failed", None, "boom", None, None),
        ("running", None, None, 0.5, "half"),
        ("LostLease",),
    ]
    inserted = outcomes[len(steps) :]
    assert all(isinstance(t, Task) for t in inserted), inserted
    assert [t.payload for t in inserted] == [{"i": i} for i in range(6)]  # type: ignore[union-attr]
    assert (await store.stats(queue="fresh"))["fresh"]["queued"] == 6


@pytest.mark.parametrize("with_settle", [False, True])
async def test_an_insert_the_driver_cannot_send_fails_only_itself(
    store: PostgresStore, with_settle: bool
) -> None:
    # The rules refuse such a value before it joins a group; reaching into the
    # group shows the multi-row insert is split when it fails anyway.
    good = [store._prepare_submit(name="good", payload={"i": i}) for i in range(5)]
    bad = store._prepare_submit(name="bad")
    bad_params = {**insert_params(bad), "name": "bad\ud800"}
    writes = [store._group.insert(insert_params(new)) for new in good[:2]]
    writes.append(store._group.insert(bad_params))
    writes.extend(store._group.insert(insert_params(new)) for new in good[2:])
    if with_settle:
        running = await _claimed(store, "settle", W, 30_000)
        writes.append(store._group.write(*_complete_sql(running.id)))
    outcomes = await asyncio.gather(*writes, return_exceptions=True)
    assert isinstance(outcomes[2], UnicodeEncodeError)
    rows = [o for i, o in enumerate(outcomes) if i != 2]
    assert all(isinstance(r, dict) for r in rows), rows
    assert [r["id"] for r in rows[:5]] == [new.id for new in good]  # type: ignore[index]
    assert await store.get(bad.id) is None
    assert [(await store.get(new.id)).name for new in good] == ["good"] * 5  # type: ignore[union-attr]
    if with_settle:
        assert rows[5]["status"] == "succeeded"  # type: ignore[index]


def _complete_sql(task_id: str) -> tuple[str, dict[str, Any], str]:
    from engine.store.postgres import _sql

    params = {"id": task_id, "worker_id": W, "result": None, "message": None}
    return _sql("complete"), params, task_id


# -- the lone write: run by its caller ----------------------------------------------------------


async def test_a_caller_cancelled_before_its_flush_leaves_the_others_written(
    store: PostgresStore,
) -> None:
    # The first caller of an idle group waits one loop pass for others to join;
    # cancelled there, it must hand the joined writes on, not strand them.
    first = asyncio.ensure_future(store.submit(name="cancelled", queue="handover"))
    others = [
        asyncio.ensure_future(store.submit(name="kept", queue="handover", payload={"i": i}))
        for i in range(5)
    ]
    await asyncio.sleep(0)  # all six ran to their wait; first leads, the others queued
    assert len(store._group._queue) == 6
    first.cancel()
    kept = await asyncio.wait_for(asyncio.gather(*others), timeout=30)
    assert [t.payload for t in kept] == [{"i": i} for i in range(5)]
    with pytest.raises(asyncio.CancelledError):
        await first
    names = [t.name for t in await store.list(queue="handover")]
    assert sorted(names) == ["kept"] * 5
    assert store._group.idle


async def test_a_lone_write_that_fails_raises_to_its_caller_and_the_group_goes_on(
    store: PostgresStore, pg_dsn: str, pg_schema: str
) -> None:
    with psycopg.connect(pg_dsn, autocommit=True, options=f"-c search_path={pg_schema}") as conn:
        conn.execute(
            "create function refuse() returns trigger language plpgsql as $$ begin "
            "if new.name = 'boom' then raise exception 'refused'; end if; "
            "return new; end $$"
        )
        conn.execute(
            "create trigger refuse before insert on cairnq_tasks "
            "for each row execute function refuse()"
        )
    with pytest.raises(psycopg.errors.RaiseException):
        await store.submit(name="boom")
    assert store._group.idle
    after = await store.submit(name="fine")
    assert (await store.get(after.id)) == after
