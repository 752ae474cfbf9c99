"""Claims hand their rows back in claim order (priority desc, then due time, then
id: docs/protocol-notes.md, "Claims and recovery"), on both dialects, through
every path that claims: the four claim variants, a claim session's draws,
Postgres's completing claim, and a worker's batch call.

Postgres's ``update ... returning`` gave the rows in whatever order it updated
them ("a then c" came back as ``[c, a]`` most of the time), so each check runs
many rounds.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

import pytest
from worker_support import finished

from engine import Task, TaskStore, Worker

ROUNDS = 10
#: Submit order and priorities: equal priorities interleave with higher and lower
#: ones, so neither insertion order nor priority alone gives the claim order.
PRIORITIES = (0, 0, 5, 0, 5, -1, 0)


def claim_order(tasks: Sequence[Task]) -> list[str]:
    return [t.id for t in sorted(tasks, key=lambda t: (-t.priority, t.run_at_ms, t.id))]


async def submit_mixed(store: TaskStore, name: str, queue: str = "default") -> list[Task]:
    """Tasks of mixed priority, the first one due last (a later ``run_at_ms``)."""
    late = await store.submit(name=name, queue=queue, delay_ms=10)
    tasks = [late]
    for i, priority in enumerate(PRIORITIES):
        task = await store.submit(name=name, queue=queue, payload={"i": i}, priority=priority)
        tasks.append(task)
    # Until the delayed one is due on this host's clock, which both dialects read.
    while time.time() * 1000 <= late.run_at_ms + 1:
        await asyncio.sleep(0.002)
    return tasks


@pytest.mark.parametrize(
    ("queues", "names"),
    [
        (["default"], ["job"]),  # claim_one_queue_one_name
        (["default"], None),  # claim_one_queue
        (["default", "other"], ["job"]),  # claim_one_name
        (["default", "other"], ["job", "else"]),  # claim
    ],
)
async def test_claim_returns_rows_in_claim_order(
    store: TaskStore, queues: list[str], names: list[str] | None
) -> None:
    for _ in range(ROUNDS):
        submitted = await submit_mixed(store, "job")
        claimed = await store.claim(
            queues=queues, worker_id="w", names=names, limit=len(submitted) + 3
        )
        assert [t.id for t in claimed] == claim_order(submitted)


async def test_claim_session_draws_come_back_in_claim_order(store: TaskStore) -> None:
    for _ in range(ROUNDS):
        submitted = await submit_mixed(store, "job")

        async def plan(draw: Any) -> list[list[Task]]:
            return [list(await draw(["job"], 3)), list(await draw(None, 10))]

        first, rest = await store.claim_session(
            queues=["default"], worker_id="w", names=None, plan=plan
        ) or ([], [])
        assert [t.id for t in first + rest] == claim_order(submitted)


@pytest.mark.postgres
@pytest.mark.parametrize("single_draw", [True, False])
async def test_completing_claim_returns_rows_in_claim_order(
    pg_store: Any, single_draw: bool
) -> None:
    for _ in range(ROUNDS):
        held = await pg_store.submit(name="held")
        (running,) = await pg_store.claim(queues=["default"], worker_id="w", names=["held"])
        submitted = await submit_mixed(pg_store, "job")

        async def plan(draw: Any) -> list[Task]:
            return list(await draw(["job"], 10))

        outcome = await pg_store.claim_session_completing(
            complete_ids=[running.id],
            queues=["default"],
            worker_id="w",
            names=["job"],
            plan=plan,
            single_draw=single_draw,
        )
        assert outcome.settled == {held.id}
        assert [t.id for t in outcome.value] == claim_order(submitted)


async def test_worker_batch_call_gets_tasks_in_claim_order(store: TaskStore) -> None:
    batch = len(PRIORITIES) + 1
    for _ in range(5):
        calls: list[list[str]] = []
        worker = Worker(store, ["default"], poll_interval_ms=20)
        worker.register(
            "bulk", lambda ctxs, seen=calls: seen.append([c.task_id for c in ctxs]), batch=batch
        )
        submitted = await submit_mixed(store, "bulk")
        async with worker.background():
            await finished(store, [t.id for t in submitted])
        assert calls == [claim_order(submitted)]
