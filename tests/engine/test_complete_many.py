"""``complete_many``: the worker's one-statement settle for handlers that return
nothing gives every task the outcome ``complete`` would have given it alone —
cancel wins, a lost or expired lease settles nothing — on both dialects.
"""

from __future__ import annotations

import asyncio

import pytest

from engine import LostLease, Task, TaskStore

W = "worker_A"
OTHER = "worker_B"


async def _claimed(store: TaskStore, queue: str, worker: str, lease_ms: int = 30_000) -> Task:
    await store.submit(name="job", queue=queue)
    (task,) = await store.claim(queues=[queue], worker_id=worker, lease_ms=lease_ms)
    return task


async def _situations(store: TaskStore, tag: str) -> list[str]:
    """Running tasks: owned, owned with cancel requested, stolen, expired."""
    plain = await _claimed(store, f"{tag}-plain", W)
    canceled = await _claimed(store, f"{tag}-cancel", W)
    await store.progress(task_id=canceled.id, worker_id=W, progress=0.25)
    await store.cancel(canceled.id)
    stolen = await _claimed(store, f"{tag}-stolen", OTHER)
    expired = await _claimed(store, f"{tag}-expired", W, lease_ms=1)
    await asyncio.sleep(0.02)
    return [plain.id, canceled.id, stolen.id, expired.id]


def _row(task: Task | None) -> tuple[object, ...]:
    assert task is not None
    return (task.status, task.result, task.progress, task.worker_id, task.lease_until_ms is None)


async def test_same_outcomes_as_complete_one_by_one(store: TaskStore) -> None:
    alone_ids = await _situations(store, "alone")
    alone_settled = set()
    for task_id in alone_ids:
        try:
            await store.complete(task_id=task_id, worker_id=W)
            alone_settled.add(task_id)
        except LostLease:
            pass
    many_ids = await _situations(store, "many")
    many_settled = await store.complete_many(task_ids=many_ids, worker_id=W)

    assert alone_settled == set(alone_ids[:2])
    assert many_settled == set(many_ids[:2])
    alone_rows = [_row(await store.get(i)) for i in alone_ids[:3]]
    many_rows = [_row(await store.get(i)) for i in many_ids[:3]]
    assert many_rows == alone_rows
    assert [r[0] for r in many_rows] == ["succeeded", "canceled", "running"]
    assert many_rows[1][2] == 0.25  # cancel wins: progress kept, not 1.0


async def test_waiters_are_woken_and_bad_input_writes_nothing(store: TaskStore) -> None:
    task = await _claimed(store, "wake", W)
    waiter = asyncio.ensure_future(store.task_done_wake(task.id, 5_000))
    await asyncio.sleep(0.01)
    assert await store.complete_many(task_ids=[task.id], worker_id=W) == {task.id}
    assert await asyncio.wait_for(waiter, 1) is True
    assert await store.complete_many(task_ids=[], worker_id=W) == set()
    other = await _claimed(store, "bad", W)
    with pytest.raises(ValueError, match="task_id"):
        await store.complete_many(task_ids=[other.id, ""], worker_id=W)
    still = await store.get(other.id)
    assert still is not None and still.status == "running"
