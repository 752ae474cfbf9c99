"""Where a sequential SQLite submit spends its time beyond its statement and COMMIT.

Run from the repository root::

    python bench/submit_hops.py [--n 2000]

Bench-only tracing, nothing in the engine changes: the writer thread's job
queue, the batch runner and the answer callback are wrapped to take
``time.perf_counter_ns()`` stamps. Per submit (``synchronous=FULL``, the
default) it prints the p50 of each step:

- call -> posted: ``submit()`` entered -> the write handed to the writer thread
  (validation, the id, JSON, the group-commit queue, one loop turn that lets a
  ``gather`` join the batch);
- posted -> thread runs: the writer thread woken from its queue;
- thread -> statement: the drain's own bookkeeping;
- statement + COMMIT: ``run_batch`` (what the floor also pays, fsync included);
- COMMIT -> loop answers: the writer thread's answer posted, the loop woken
  from its selector;
- answer -> caller back: the future resolved, the submit's Task built, the
  in-process signal, the return through the client.

Beside them, the floor: the same ``insert_task`` on raw sqlite3 in the calling
thread, one COMMIT per op (``store_bench.py``'s floor), in turns with the engine.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from store_bench import floor_sequential_submit

from engine import CairnQ, SQLiteStore
from engine.store import _sqlite_group, _sqlite_sync, _sqlite_thread

STEPS = (
    "call -> posted",
    "posted -> thread runs",
    "thread -> statement",
    "statement + COMMIT",
    "COMMIT -> loop answers",
    "answer -> caller back",
)
_stamps: dict[str, int] = {}


def _trace() -> None:
    """Wrap the writer thread's hand-offs to stamp each step of one write."""
    run_batch = _sqlite_sync.run_batch
    post = _sqlite_thread.WriterThread.post
    settle = _sqlite_group._settle

    def traced_run_batch(raw: sqlite3.Connection, items: Any) -> Any:
        _stamps["statement"] = time.perf_counter_ns()
        try:
            return run_batch(raw, items)
        finally:
            _stamps["committed"] = time.perf_counter_ns()

    def traced_post(self: _sqlite_thread.WriterThread, job: Callable[[], None]) -> None:
        _stamps["posted"] = time.perf_counter_ns()

        def stamped() -> None:
            _stamps["thread"] = time.perf_counter_ns()
            job()

        post(self, stamped)

    def traced_settle(pairs: Any) -> None:
        _stamps["answered"] = time.perf_counter_ns()
        settle(pairs)

    _sqlite_sync.run_batch = traced_run_batch  # type: ignore[assignment]
    _sqlite_thread.WriterThread.post = traced_post  # type: ignore[method-assign]
    _sqlite_group._settle = traced_settle


async def engine_steps(client: CairnQ, n: int) -> tuple[list[tuple[int, ...]], float]:
    rows: list[tuple[int, ...]] = []
    started = time.perf_counter()
    for i in range(n):
        begun = time.perf_counter_ns()
        await client.submit("bench", {"i": i})
        back = time.perf_counter_ns()
        s = _stamps
        rows.append(
            (
                s["posted"] - begun,
                s["thread"] - s["posted"],
                s["statement"] - s["thread"],
                s["committed"] - s["statement"],
                s["answered"] - s["committed"],
                back - s["answered"],
            )
        )
    return rows, n / (time.perf_counter() - started)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    _trace()
    folder = tempfile.mkdtemp(prefix="submit_hops_")
    store = SQLiteStore(os.path.join(folder, "engine.db"))
    floor_store = SQLiteStore(os.path.join(folder, "floor.db"))
    await floor_store.connect()
    await floor_store.close()
    raw = sqlite3.connect(os.path.join(folder, "floor.db"), isolation_level=None)
    raw.execute("pragma journal_mode=wal")
    raw.execute("pragma synchronous=full")
    rows: list[tuple[int, ...]] = []
    rates, floors = [], []
    async with CairnQ(store) as client:
        for _ in range(100):
            await client.submit("warm", {})
        for _ in range(args.rounds):
            got, rate = await engine_steps(client, args.n)
            rows += got
            rates.append(rate)
            floors.append(floor_sequential_submit(raw, args.n))
    raw.close()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"sequential submit, SQLite synchronous=FULL, {args.rounds} x {args.n}, load {load}")
    print(f"{'step':26} {'p50 µs':>8} {'mean µs':>8}")
    for k, step in enumerate(STEPS):
        p50 = statistics.median(r[k] for r in rows) / 1000
        print(f"{step:26} {p50:8.1f} {statistics.fmean(r[k] for r in rows) / 1000:8.1f}")
    p50 = statistics.median(sum(r) for r in rows) / 1000
    print(f"{'total':26} {p50:8.1f} {statistics.fmean(sum(r) for r in rows) / 1000:8.1f}")
    rate, floor = statistics.median(rates), statistics.median(floors)
    print(
        f"engine {rate:,.0f}/s ({1e6 / rate:.0f} µs), floor {floor:,.0f}/s ({1e6 / floor:.0f} µs): "
        f"{rate / floor:.0%} of floor"
    )


if __name__ == "__main__":
    asyncio.run(main())
