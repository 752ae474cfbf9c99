"""A run whose lease ran out while its heartbeats failed must not settle the task later.

Found by scenario 3 (a Postgres restart mid-run): a handler's heartbeats failed
while the server was away, its lease expired, lease recovery requeued the task
and the *same worker* claimed it again (attempt 2). When the first handler then
returned, its ``ctx.succeed`` was accepted: the row matched the ownership
predicate again (same worker id, running, a live lease — attempt 2's). The task
ended ``succeeded`` with attempt 1's result while attempt 2 was still running.
The protocol (docs/protocol-notes.md, "Worker") names this hazard as the reason
for the worker's local lease gate, which then closed only when a heartbeat reply
omitted the task; it now also closes when the lease deadline passes without a
successful renewal. (The cairnq SDK 0.15.1 accepted the stale write in the same reproduction.)

Reproduced deterministically on SQLite: another connection holds the write lock
for twice the lease, so the heartbeats fail with SQLITE_BUSY.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path
from typing import Any

from engine import LostLease, Worker
from engine.store.sqlite import SQLiteStore

LEASE_MS = 400


def hold_write_lock(path: Path, seconds: float, locked: threading.Event) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("begin exclusive")
    locked.set()
    threading.Event().wait(seconds)
    conn.execute("commit")
    conn.close()


async def test_stale_run_cannot_settle_after_its_lease_ran_out(tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    errors: list[BaseException] = []
    worker = Worker.sqlite(
        str(path),
        concurrency=2,
        lease_ms=LEASE_MS,
        poll_interval_ms=50,
        busy_timeout_ms=100,
        on_error=lambda exc, info: errors.append(exc),
    )
    first_running, second_running = asyncio.Event(), asyncio.Event()
    outcome: dict[str, Any] = {}

    @worker.task("stale.probe")
    async def probe(ctx: Any) -> None:
        if ctx.attempt == 1:
            first_running.set()
            await second_running.wait()
            try:
                outcome["first"] = await ctx.succeed({"attempt": 1})
            except LostLease:
                outcome["first"] = "LostLease"
            return
        second_running.set()
        await asyncio.sleep(0.05)
        try:
            outcome["second"] = await ctx.succeed({"attempt": ctx.attempt})
        except LostLease:
            outcome["second"] = "LostLease"

    store = SQLiteStore(str(path))
    async with store:
        task = await store.submit(name="stale.probe")
        async with worker.background():
            await asyncio.wait_for(first_running.wait(), 10)
            locked = threading.Event()
            holder = threading.Thread(
                target=hold_write_lock, args=(path, 2 * LEASE_MS / 1000, locked)
            )
            holder.start()
            await asyncio.to_thread(locked.wait)
            await asyncio.to_thread(holder.join)
            await asyncio.wait_for(second_running.wait(), 10)
            for _ in range(100):
                if "first" in outcome and "second" in outcome:
                    break
                await asyncio.sleep(0.05)
        row = await store.get(task.id)

    assert errors, "the heartbeats were expected to fail while the lock was held"
    assert row is not None and row.attempt == 2
    # The abandoned first run must not settle the task the second run holds.
    assert outcome["first"] in ("LostLease", None), outcome
    assert row.status == "succeeded" and row.result == {"attempt": 2}, (row.status, row.result)
