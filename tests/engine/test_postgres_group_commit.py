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
