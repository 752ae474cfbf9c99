"""``TaskContext.lease_lost`` is made on first use (a batch drain makes one context
per task and most handlers never look at it): whenever it is first asked for,
it reports the lease as the context knows it, and it is one event throughout."""

from __future__ import annotations

import asyncio
from pathlib import Path

from engine import SQLiteStore, TaskContext


async def _context(tmp_path: Path) -> tuple[SQLiteStore, TaskContext]:
    store = SQLiteStore(tmp_path / "tasks.db")
    await store.connect()
    await store.submit(name="n", queue="q", payload={})
    (task,) = await store.claim(queues=["q"], worker_id="w", limit=1)
    return store, TaskContext(task, store=store, worker_id="w", lease_ms=30_000)


async def test_event_asked_for_before_the_loss_is_set_by_it(tmp_path: Path) -> None:
    store, ctx = await _context(tmp_path)
    try:
        event = ctx.lease_lost
        assert not event.is_set()
        waiter = asyncio.ensure_future(event.wait())
        await asyncio.sleep(0)
        ctx.mark_lost()
        await asyncio.wait_for(waiter, 5)
        assert ctx.lease_lost is event and event.is_set()
    finally:
        await store.close()


async def test_event_first_asked_for_after_the_loss_is_already_set(tmp_path: Path) -> None:
    store, ctx = await _context(tmp_path)
    try:
        ctx.mark_lost()
        assert ctx.lost_lease
        event = ctx.lease_lost
        assert event.is_set()
        await asyncio.wait_for(event.wait(), 5)
        assert ctx.lease_lost is event
    finally:
        await store.close()
