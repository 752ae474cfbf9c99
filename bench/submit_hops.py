"""Where a sequential SQLite submit spends its time beyond its statement and COMMIT.

Run from the repository root::

    python bench/submit_hops.py [--n 2000] [--gather 64]

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

``--gather 64`` times gathers of 64 concurrent submits instead (store_bench's
"64 concurrent submits" row): the steps are then per gather, one batch and
one COMMIT each; "call -> posted" is the loop's Python for all 64 submits up
to the batch's hand-off, "statement + COMMIT" the 64 inserts and their
COMMIT on the writer thread, "answer -> caller back" the 64 answers resolved
and the submits' Python after them. Its floor is ``store_bench.py``'s: 64
inserts in one ``BEGIN IMMEDIATE`` .. ``COMMIT``.
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

from store_bench import floor_concurrent_submit, floor_sequential_submit

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
        _stamps.setdefault("statement", time.perf_counter_ns())
        try:
            return run_batch(raw, items)
        finally:
            _stamps["committed"] = time.perf_counter_ns()

    def traced_post(self: _sqlite_thread.WriterThread, job: Callable[[], None]) -> None:
        _stamps.setdefault("posted", time.perf_counter_ns())

        def stamped() -> None:
            _stamps.setdefault("thread", time.perf_counter_ns())
            job()

        post(self, stamped)

    def traced_settle(pairs: Any) -> None:
        _stamps["answered"] = time.perf_counter_ns()
        settle(pairs)

    _sqlite_sync.run_batch = traced_run_batch  # type: ignore[assignment]
    _sqlite_thread.WriterThread.post = traced_post  # type: ignore[method-assign]
    _sqlite_group._settle = traced_settle


async def engine_steps(client: CairnQ, n: int, gather: int) -> tuple[list[tuple[int, ...]], float]:
    """Per op (a gather of ``gather`` submits when above 1): its steps in ns; the rate."""
    rows: list[tuple[int, ...]] = []
    started = time.perf_counter()
    for first in range(0, n, gather):
        _stamps.clear()  # an op's first hand-off and statement, its last COMMIT and answer
        begun = time.perf_counter_ns()
        if gather == 1:
            await client.submit("bench", {"i": first})
        else:
            count = min(gather, n - first)
            await asyncio.gather(*(client.submit("bench", {"i": first + j}) for j in range(count)))
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
    parser.add_argument("--gather", type=int, default=1, help="submits per gather (1: sequential)")
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
            got, rate = await engine_steps(client, args.n, args.gather)
            rows += got
            rates.append(rate)
            if args.gather == 1:
                floors.append(floor_sequential_submit(raw, args.n))
            else:
                floors.append(floor_concurrent_submit(raw, args.n))
    raw.close()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    shape = "sequential submit" if args.gather == 1 else f"gathers of {args.gather} submits"
    print(f"{shape}, SQLite synchronous=FULL, {args.rounds} x {args.n}, load {load}")
    each = "" if args.gather == 1 else " (per gather)"
    print(f"{'step' + each:26} {'p50 µs':>8} {'mean µs':>8}")
    for k, step in enumerate(STEPS):
        p50 = statistics.median(r[k] for r in rows) / 1000
        print(f"{step:26} {p50:8.1f} {statistics.fmean(r[k] for r in rows) / 1000:8.1f}")
    p50 = statistics.median(sum(r) for r in rows) / 1000
    print(f"{'total':26} {p50:8.1f} {statistics.fmean(sum(r) for r in rows) / 1000:8.1f}")
    rate, floor = statistics.median(rates), statistics.median(floors)
    print(
        f"engine {rate:,.0f}/s ({1e6 / rate:.1f} µs a submit), floor {floor:,.0f}/s "
        f"({1e6 / floor:.1f} µs): {rate / floor:.0%} of floor"
    )


if __name__ == "__main__":
    asyncio.run(main())
