"""A row whose JSON the engine cannot decode fails only itself, on both dialects.

Another writer (a cairnq SDK with a raised recursion limit, a hand-written
row) can store a payload nested deeper than ``engine._json.MAX_DEPTH``. Such a
row is written here with raw SQL between good tasks: every claim path (a
claim, a claim session's draws, the worker's completing claims, the worker's
drain) hands out the good tasks as if it were not there and fails the bad one
once, with an envelope that says why; reads for inspection show its raw text.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import pytest
from store_support import Database
from worker_support import eventually

from engine import PostgresStore, SerializationError, SQLiteStore, Task, TaskStore, Worker
from engine._json import MAX_DEPTH
from engine.inspection import Inspector, TaskFilter, UndecodableJSON

W = "worker_A"
DEEP = "[" * 1_100 + "]" * 1_100


async def plant(store: TaskStore, database: Database, column: str = "payload") -> str:
    """A queued task (first in claim order) whose ``column`` holds ``DEEP``."""
    task = await store.submit(name="job", payload={"bad": True}, priority=5)
    cast = "?::jsonb" if database.dialect == "postgres" else "?"
    database.rows(f"update cairnq_tasks set {column} = {cast} where id = ?", (DEEP, task.id))
    return task.id


async def goods(store: TaskStore, count: int) -> list[str]:
    """``count`` good tasks' ids, in the order claims take them (run_at_ms, then id:
    two submits in one millisecond need not be in id order)."""
    tasks = [await store.submit(name="job", payload={"i": i}) for i in range(count)]
    return [t.id for t in sorted(tasks, key=lambda t: (t.run_at_ms, t.id))]


def assert_failed_once(
    database: Database, task_id: str, field: str = "payload", worker_id: str = W
) -> None:
    [(status, attempt, error, worker)] = database.rows(
        "select status, attempt, error, worker_id from cairnq_tasks where id = ?", (task_id,)
    )
    assert (status, attempt) == ("failed", 1)
    text = error if isinstance(error, str) else json.dumps(error)
    assert '"undecodable_json"' in text
    assert f"nested deeper than {MAX_DEPTH} levels" in text
    assert field in text
    assert worker == worker_id


def completing(store: TaskStore) -> Any:
    assert isinstance(store, SQLiteStore | PostgresStore)
    return store.claim_session_completing


async def test_claims_of_one_drain_around_it(store: TaskStore, database: Database) -> None:
    bad = await plant(store, database)
    good = await goods(store, 5)
    claimed: list[str] = []
    for _ in range(10):
        got = await store.claim(queues=["default"], worker_id=W, limit=1)
        if not got:
            break
        claimed += [t.id for t in got]
    assert claimed == good  # the first claim already handed out a good task
    assert_failed_once(database, bad)


async def test_claim_batches_drain_around_it(store: TaskStore, database: Database) -> None:
    good = await goods(store, 8)
    bad = await plant(store, database)
    good += await goods(store, 12)
    claimed: list[Task] = []
    while batch := await store.claim(queues=["default"], worker_id=W, limit=5):
        assert len(batch) == 5 or not await store.claim(queues=["default"], worker_id=W)
        claimed += batch
    assert sorted(t.id for t in claimed) == sorted(good)
    assert all(isinstance(t.payload, dict) for t in claimed)
    assert_failed_once(database, bad)


async def test_undecodable_metadata_is_set_aside_too(store: TaskStore, database: Database) -> None:
    bad = await plant(store, database, column="metadata")
    good = await goods(store, 3)
    claimed = await store.claim(queues=["default"], worker_id=W, limit=10)
    assert sorted(t.id for t in claimed) == sorted(good)
    assert_failed_once(database, bad, field="metadata")


async def test_claim_session_draws_drain_around_it(store: TaskStore, database: Database) -> None:
    bad = await plant(store, database)
    good = await goods(store, 6)
    draws: list[list[str]] = []

    async def plan(draw: Any) -> None:
        for _ in range(3):
            draws.append([t.id for t in await draw(None, 2)])

    await store.claim_session(queues=["default"], worker_id=W, names=None, plan=plan)
    assert [len(ids) for ids in draws] == [2, 2, 2]  # every draw as full as asked
    assert sorted(i for ids in draws for i in ids) == sorted(good)
    assert_failed_once(database, bad)


@pytest.mark.parametrize("single_draw", [False, True])
async def test_completing_claims_drain_around_it(
    store: TaskStore, database: Database, single_draw: bool
) -> None:
    first = await goods(store, 2)
    running = await store.claim(queues=["default"], worker_id=W, limit=2)
    bad = await plant(store, database)
    good = await goods(store, 4)

    async def plan(draw: Any) -> list[str]:
        return [t.id for t in await draw(None, 3)]

    outcome = await completing(store)(
        complete_ids=[t.id for t in running],
        queues=["default"],
        worker_id=W,
        names=None,
        plan=plan,
        single_draw=single_draw,
    )
    assert outcome.claim_error is None
    assert outcome.settled == set(first)
    # A single draw's COMMIT travels with it (both dialects): no second draw tops it up.
    short = single_draw and store.capabilities.single_draw_commits
    assert outcome.value == (good[:2] if short else good[:3])
    assert_failed_once(database, bad)
    rest = await store.claim(queues=["default"], worker_id=W, limit=10)
    assert [t.id for t in rest] == good[len(outcome.value) :]


@pytest.mark.parametrize("batch", [None, 4])
async def test_a_worker_drains_the_good_tasks(
    store: TaskStore, database: Database, batch: int | None
) -> None:
    good = await goods(store, 10)
    bad = await plant(store, database)
    good += await goods(store, 10)
    done: list[str] = []
    # Polls a minute apart: a worker waiting for its next poll would never finish.
    worker = Worker(store, ["default"], concurrency=3, poll_interval_ms=60_000, claim_batch=batch)

    @worker.task(batch=batch)
    async def job(ctx: Any) -> None:
        for one in ctx if isinstance(ctx, Sequence) else [ctx]:
            done.append(one.task_id)

    async with worker.background():
        await eventually(lambda: len(done) >= len(good), timeout=30)
        await asyncio.sleep(0.1)
    assert sorted(done) == sorted(good)
    assert_failed_once(database, bad, worker_id=worker.worker_id)
    assert worker.snapshot().recent_errors == ()


async def test_reads_show_the_raw_text(store: TaskStore, database: Database) -> None:
    bad = await plant(store, database)
    good = await goods(store, 2)
    task = await store.get(bad)
    assert task is not None
    assert task.payload == UndecodableJSON(DEEP, f"nested deeper than {MAX_DEPTH} levels")
    listed = await store.list(limit=10)
    assert {t.id for t in listed} == {bad, *good}
    detail = await Inspector(store).task_detail(bad)
    assert detail is not None and isinstance(detail.task.payload, UndecodableJSON)
    for search in (None, TaskFilter(search="[[[", search_kind="payload")):
        page = await Inspector(store).tasks_page(search or TaskFilter())
        assert bad in {r.id for r in page.rows}


async def test_cancel_reports_its_success(store: TaskStore, database: Database) -> None:
    bad = await plant(store, database)
    canceled = await store.cancel(bad)
    assert canceled is not None and canceled.status == "canceled"
    assert isinstance(canceled.payload, UndecodableJSON)
    assert database.rows("select status from cairnq_tasks where id = ?", (bad,)) == [("canceled",)]


async def test_the_engine_writes_only_what_it_reads_back(
    store: TaskStore, database: Database
) -> None:
    deepest: Any = "leaf"
    for _ in range(MAX_DEPTH):
        deepest = [deepest]
    task = await store.submit(name="job", payload=deepest)
    got = await store.get(task.id)
    assert got is not None and not isinstance(got.payload, UndecodableJSON)
    depth, inner = 0, got.payload
    while isinstance(inner, list):
        depth, inner = depth + 1, inner[0]
    assert (depth, inner) == (MAX_DEPTH, "leaf")
    before = database.rows("select count(*) from cairnq_tasks")
    with pytest.raises(SerializationError, match=f"deeper than {MAX_DEPTH}"):
        await store.submit(name="job", payload=[deepest])
    with pytest.raises(SerializationError, match=f"deeper than {MAX_DEPTH}"):
        await store.submit(name="job", metadata={"m": [deepest]})
    assert database.rows("select count(*) from cairnq_tasks") == before
