"""A SQLite claim that draws once is one job: its statements run where its COMMIT does.

Under ``synchronous=FULL`` that is the writer thread, so a worker's claims do
not hold its event loop for their statements (a cycle's settlements, lease
recovery and the claim: ~0.3 ms at concurrency 8, ~10 ms at batch=64 inline);
under ``synchronous=NORMAL`` nothing fsyncs, and the job runs inline. A write
lock held by another connection is waited out off the loop, the loop serving
its other tasks meanwhile.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from engine import CairnQ, SQLiteStore, Worker
from engine.store import _sqlite_claims


@pytest.fixture
def job_threads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The thread each single-draw claim job ran on (the real job runs)."""
    seen: list[int] = []
    job = _sqlite_claims.settle_and_claim

    def spied(*args: Any) -> Any:
        seen.append(threading.get_ident())
        return job(*args)

    monkeypatch.setattr(_sqlite_claims, "settle_and_claim", spied)
    return seen


async def drain(path: Path, synchronous: str, count: int) -> list[str]:
    """Submit ``count`` tasks and drain them with one worker; their statuses."""
    store = SQLiteStore(path, synchronous=synchronous)  # type: ignore[arg-type]
    async with CairnQ(store) as client:
        ids = [(await client.submit("echo", i)).id for i in range(count)]
        worker = Worker(store, ["default"], concurrency=4)

        async def echo(ctx: Any, payload: Any) -> Any:
            return payload

        worker.register("echo", echo)
        async with worker.background():
            done = [await client.wait(i, timeout_ms=20_000) for i in ids]
    return [t.status for t in done]


async def test_under_full_a_workers_claims_run_on_the_writer_thread(
    tmp_path: Path, job_threads: list[int]
) -> None:
    assert await drain(tmp_path / "full.db", "full", 40) == ["succeeded"] * 40
    assert job_threads, "the worker's claims drew once each: one job each"
    assert threading.get_ident() not in job_threads
    assert len(set(job_threads)) == 1  # the store's one writer thread


async def test_under_normal_the_job_runs_inline(tmp_path: Path, job_threads: list[int]) -> None:
    assert await drain(tmp_path / "normal.db", "normal", 40) == ["succeeded"] * 40
    assert job_threads and set(job_threads) == {threading.get_ident()}


async def test_a_write_lock_held_elsewhere_is_waited_out_off_the_loop(tmp_path: Path) -> None:
    path = tmp_path / "locked.db"
    async with CairnQ(SQLiteStore(path)) as client:
        task = await client.submit("job", 1)
        other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        other.execute("begin immediate")  # another connection holds the write lock
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.005)
                ticks += 1

        async def one(draw: Any) -> Any:
            return await draw(None, 1)

        ticking = asyncio.ensure_future(ticker())
        claim = asyncio.ensure_future(
            client.store.claim_session(
                queues=["default"], worker_id="w", names=None, plan=one, single_draw=True
            )
        )
        try:
            while ticks < 10:  # the loop serves other tasks while the claim waits
                await asyncio.sleep(0.005)
            assert not claim.done()
            other.execute("commit")
            claimed = await asyncio.wait_for(claim, 20)
        finally:
            ticking.cancel()
            other.close()
    assert [t.id for t in claimed] == [task.id]
