"""Settlements of every kind share the refill claim's commit (issue 25, point 2), on
both dialects: results, failures and no-result completions of handlers that finish
together go out in one completing claim, and one bad value costs only its own task.
"""

from __future__ import annotations

import asyncio
from typing import Any

from store_support import Database
from test_completing_claim import refuse_updates, statuses
from worker_support import finished

from engine import PostgresStore, SQLiteStore, TaskError, TaskStore, Worker
from engine.store._base import CompletingClaim

SLOTS = 8


class Rides:
    """The store's completing claims, recorded: (no-result ids, settlements) per call."""

    def __init__(self, store: TaskStore) -> None:
        assert isinstance(store, SQLiteStore | PostgresStore)
        self.calls: list[tuple[int, list[str]]] = []
        original = store.claim_session_completing

        async def recorded(**kwargs: Any) -> CompletingClaim[Any]:
            kinds = [s.kind for s in kwargs.get("settles", ())]
            self.calls.append((len(kwargs["complete_ids"]), kinds))
            return await original(**kwargs)

        store.claim_session_completing = recorded  # type: ignore[method-assign]


def gated_worker(store: TaskStore) -> tuple[Worker, asyncio.Event, list[str]]:
    """A worker of ``SLOTS`` whose handlers all wait until ``SLOTS`` of them started,
    so they return in one loop pass; each does what its payload's ``do`` says."""
    worker = Worker(store, ["default"], concurrency=SLOTS, poll_interval_ms=20)
    gate = asyncio.Event()
    started: list[str] = []

    @worker.task
    async def job(ctx: Any, payload: dict[str, Any]) -> Any:
        started.append(ctx.task_id)
        if len(started) >= SLOTS:
            gate.set()
        await gate.wait()
        do = payload["do"]
        if do == "value":
            return {"n": payload["i"]}
        if do == "nothing":
            return None
        if do == "unserializable":
            return object()
        raise TaskError("refused", "by the handler", retryable=False)

    return worker, gate, started


KINDS = ["value", "nothing", "unserializable", "raise", "value", "value", "nothing", "raise"]


async def test_results_failures_and_completions_share_one_commit(store: TaskStore) -> None:
    rides = Rides(store)
    tasks = [await store.submit(name="job", payload={"do": d, "i": i}) for i, d in enumerate(KINDS)]
    worker, _, _ = gated_worker(store)
    async with worker.background():
        done = await finished(store, [t.id for t in tasks])
    by_kind = [(d, t.status) for d, t in zip(KINDS, done, strict=True)]
    assert by_kind == [(d, "succeeded" if d in ("value", "nothing") else "failed") for d in KINDS]
    assert [t.result for t, d in zip(done, KINDS, strict=True) if d == "value"] == [
        {"n": 0},
        {"n": 4},
        {"n": 5},
    ]
    unserializable = done[KINDS.index("unserializable")]
    assert unserializable.error is not None and unserializable.attempt == 1
    # All eight finished in one loop pass: one completing claim carried them all
    # (two no-result ids, three results, three failures), the refill riding with it.
    assert (2, sorted(["complete"] * 3 + ["fail"] * 3)) in [
        (n, sorted(kinds)) for n, kinds in rides.calls
    ]


async def test_a_refused_row_fails_only_its_own_settlement(
    store: TaskStore, database: Database
) -> None:
    """The database refuses one task's result: the shared transaction rolls back,
    every settlement is written alone, and only that one is left to its lease."""
    rides = Rides(store)
    kinds = ["value"] * 4 + ["nothing", "raise", "unserializable", "value"]
    tasks = [await store.submit(name="job", payload={"do": d, "i": i}) for i, d in enumerate(kinds)]
    bad = tasks[2].id
    refuse_updates(database, f"old.id = '{bad}' and new.status = 'succeeded'")
    more = [await store.submit(name="job", payload={"do": "value", "i": 100 + i}) for i in range(8)]
    worker, _, _ = gated_worker(store)
    good = [t.id for t in tasks + more if t.id != bad]
    async with worker.background():
        done = await finished(store, good)
        while worker.snapshot().calls:
            await asyncio.sleep(0.01)
    assert [t.status for t in done] == [
        "failed" if t.id in (tasks[5].id, tasks[6].id) else "succeeded" for t in done
    ]
    seen = statuses(database)
    assert seen[bad] == ("running", worker.worker_id)  # left to its lease
    errors = worker.snapshot().recent_errors
    assert errors and all(e.task_id == bad for e in errors)
    # The first group of eight rode together (and failed together) before each went alone.
    assert any(len(kinds) >= 7 for _, kinds in rides.calls)
