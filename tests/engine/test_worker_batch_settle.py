"""The worker's shared settle (``complete_many``) through real handlers, on both
dialects: a batch whose leftovers meet a cancel request, a lease lost without
any heartbeat saying so, results and no results, each task ends as it would
have with one ``complete`` per task.
"""

from __future__ import annotations

import asyncio
from typing import Any

from worker_support import finished

from engine import TaskStore, Worker


async def test_batch_leftovers_each_get_their_own_outcome(store: TaskStore) -> None:
    # Heartbeats far apart: only the settle itself can find the stolen lease.
    worker = Worker(store, ["default"], poll_interval_ms=20, heartbeat_interval_ms=60_000)
    seen: dict[str, Any] = {}

    @worker.task(batch=5)
    async def five(ctxs):
        by_i = {c.payload["i"]: c for c in ctxs}
        seen["contexts"] = by_i
        await store.cancel(by_i[1].task_id)  # cancel wins over the completion
        # Settled behind the context's back, as another party would.
        await store.fail(
            task_id=by_i[2].task_id,
            worker_id=worker.worker_id,
            error={"type": "X", "code": "x", "message": "taken", "retryable": False},
            retryable=False,
        )
        await by_i[4].progress(0.5)
        return {by_i[3].task_id: {"kept": 3}}  # 0, 1, 2 and 4 return nothing

    ids = [(await store.submit(name="five", payload={"i": i})).id for i in range(5)]
    async with worker.background():
        done = await finished(store, ids)
    outcome = [(t.status, t.result, t.progress) for t in done]
    assert outcome == [
        ("succeeded", None, 1.0),
        ("canceled", None, None),
        ("failed", None, None),
        ("succeeded", {"kept": 3}, 1.0),
        ("succeeded", None, 1.0),
    ]
    assert done[2].error is not None and done[2].error["message"] == "taken"
    contexts = seen["contexts"]
    assert [contexts[i].lost_lease for i in range(5)] == [False, False, True, False, False]


async def test_single_task_calls_finishing_together_share_settles(store: TaskStore) -> None:
    worker = Worker(store, ["default"], poll_interval_ms=20, concurrency=8)
    gate = asyncio.Event()
    started = 0

    @worker.task
    async def join(ctx):
        nonlocal started
        started += 1
        await asyncio.wait_for(gate.wait(), 5)  # all eight return in one loop pass

    ids = [(await store.submit(name="join")).id for _ in range(8)]
    canceled = ids[5]
    async with worker.background():
        while started < 8:
            await asyncio.sleep(0.005)
        await store.cancel(canceled)
        gate.set()
        done = await finished(store, ids)
    assert [t.status for t in done] == ["succeeded"] * 5 + ["canceled"] + ["succeeded"] * 2
