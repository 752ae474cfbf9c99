"""Where a SQLite drain cycle spends its time, beside the floor's cycle.

Run from the repository root::

    python bench/drain_cycle.py [--tasks 5000] [--batch 64] [--rounds 3]

A worker at concurrency 8 (or with a batch handler) drains no-op tasks in
*cycles*: one completing claim settles the calls that finished and claims
their replacements in one transaction (``claim_session_completing``), then
the worker starts the new calls, their handlers run, and their settlements
ride the next cycle. A worker with one source draws once per cycle, so its
whole transaction is one job for the writer thread (``_sqlite_claims``).
Bench-only tracing, nothing in the engine changes: the store's
``claim_session_completing``, the writer's ``run``, the job itself
(``settle_and_claim``) and its COMMIT (``_sqlite_sync.commit``) are wrapped
to take ``time.perf_counter_ns()`` stamps. Per cycle it prints the p50 and
mean of each step:

- claim starts -> job posted: the loop's Python up to the draw (the
  arguments checked, the plan, the statements' parameters);
- job posted -> thread runs it: the hop there (the loop finishing its turn
  and letting go of the GIL, the thread woken from its queue);
- statements (writer thread): ``BEGIN IMMEDIATE``, ``complete_many``, lease
  recovery, the claim, as the floor runs them;
- COMMIT (fsync): what the floor also pays;
- COMMIT -> loop resumes: the hop back (the connection released, the answer
  posted, the loop woken from its selector, the awaiting frames resumed);
- resumed -> claim returns: the claimed, settled and recovered rows decoded;
- claim returns -> next cycle: the worker's Python between two cycles (the
  freed calls released, the claimed ones dispatched as asyncio tasks, the
  handlers run, their settlements queued, the next plan).

Beside them the floor's cycle: the same statements on raw sqlite3 in one
thread, one COMMIT per cycle (``worker_bench.py``'s drain floor), split into
its statements and its COMMIT, in turns with the engine.
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
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from worker_bench import Target, _sqlite_floor, prefill

import engine
from engine.store import _sqlite_claims, _sqlite_sync, _sqlite_writer

STEPS = (
    "claim starts -> job posted",
    "job posted -> thread runs it",
    "statements (writer thread)",
    "COMMIT (fsync)",
    "COMMIT -> loop resumes",
    "resumed -> claim returns",
    "claim returns -> next cycle",
)
#: The stamps of the cycle on its way, and every finished cycle's steps (ns).
_stamps: dict[str, int] = {}
_cycles: list[tuple[int, ...]] = []
#: Whether finished cycles are recorded (only while a traced drain runs).
_cycles_open = [False]


def _trace(store: Any) -> None:
    """Wrap one store's cycle, its writer's jobs and their COMMIT to stamp each step."""
    commit = _sqlite_sync.commit
    job = _sqlite_claims.settle_and_claim
    run = _sqlite_writer.SQLiteWriter.run
    completing = store.claim_session_completing

    def traced_commit(raw: sqlite3.Connection) -> None:
        _stamps["commit"] = time.perf_counter_ns()
        try:
            commit(raw)
        finally:
            _stamps["committed"] = time.perf_counter_ns()

    def traced_job(*args: Any) -> Any:
        _stamps["thread"] = time.perf_counter_ns()
        return job(*args)

    async def traced_run(self: _sqlite_writer.SQLiteWriter, fn: Any, *args: Any, **kw: Any) -> Any:
        _stamps["posted"] = time.perf_counter_ns()
        try:
            return await run(self, fn, *args, **kw)
        finally:
            _stamps["resumed"] = time.perf_counter_ns()

    async def traced_completing(*args: Any, **kwargs: Any) -> Any:
        begun = time.perf_counter_ns()
        previous = _stamps.get("returned")
        _stamps.clear()
        out = await completing(*args, **kwargs)
        s = _stamps
        s["returned"] = time.perf_counter_ns()
        stamped = {"posted", "thread", "commit", "committed", "resumed"} <= s.keys()
        if previous is not None and _cycles_open[0] and stamped:
            _cycles.append(
                (
                    s["posted"] - begun,
                    s["thread"] - s["posted"],
                    s["commit"] - s["thread"],
                    s["committed"] - s["commit"],
                    s["resumed"] - s["committed"],
                    s["returned"] - s["resumed"],
                    begun - previous,
                )
            )
        return out

    _sqlite_sync.commit = traced_commit  # type: ignore[assignment]
    _sqlite_claims.settle_and_claim = traced_job  # type: ignore[assignment]
    _sqlite_writer.SQLiteWriter.run = traced_run  # type: ignore[method-assign]
    store.claim_session_completing = traced_completing


async def engine_drain(workdir: str, tasks: int, batch: int | None) -> float:
    """Tasks/s of one traced drain; its cycles land in ``_cycles``."""
    target = Target("sqlite", "", workdir)
    await prefill(target, tasks, "noop")
    async with engine.CairnQ(target.engine_store()) as client:
        _trace(client.store)
        worker = engine.Worker(client.store, ["default"], concurrency=8)
        done = asyncio.Event()
        seen = 0

        def count(n: int) -> None:
            nonlocal seen
            seen += n
            if seen >= tasks:
                done.set()

        async def noop(ctx: Any, payload: Any) -> None:
            count(1)

        async def noop_batch(ctxs: list[Any]) -> None:
            count(len(ctxs))

        if batch is None:
            worker.register("noop", noop)
        else:
            worker.register("noop", noop_batch, batch=batch)
        _cycles_open[0] = True
        _stamps.clear()
        started = time.perf_counter()
        async with worker.background():
            await done.wait()
            while worker.snapshot().calls:
                await asyncio.sleep(0.0005)
            elapsed = time.perf_counter() - started
        _cycles_open[0] = False
    return tasks / elapsed


async def floor_cycles(workdir: str, tasks: int, slots: int) -> list[tuple[int, int]]:
    """The floor's cycles (``worker_bench``'s): (statements, COMMIT) in ns each."""
    target = Target("sqlite", "", workdir)
    await prefill(target, tasks, "noop")
    split: list[tuple[int, int]] = []
    _sqlite_floor(target.path, max(1, tasks // slots), slots, split)
    return split


def _row(label: str, values: list[int]) -> str:
    p50, mean = statistics.median(values) / 1000, statistics.fmean(values) / 1000
    return f"{label:34} {p50:8.1f} {mean:8.1f}"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=5000)
    parser.add_argument("--batch", type=int, default=None, help="a batch handler of this size")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    # A batch worker claims a batch for each of its 8 slots per cycle.
    slots = 8 * (args.batch or 1)
    workdir = tempfile.mkdtemp(prefix="drain_cycle_")
    rates, floor_rows = [], []
    for _ in range(args.rounds):
        rates.append(await engine_drain(workdir, args.tasks, args.batch))
        floor_rows += await floor_cycles(workdir, args.tasks, slots)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    shape = f"batch={args.batch}" if args.batch else "concurrency 8"
    print(
        f"SQLite drain cycle, {shape} ({slots} tasks a cycle), synchronous=FULL, "
        f"{args.rounds} x {args.tasks} tasks, load {load}"
    )
    print(f"{'engine step (µs a cycle)':34} {'p50':>8} {'mean':>8}")
    for k, step in enumerate(STEPS):
        print(_row(step, [c[k] for c in _cycles]))
    print(_row("cycle", [sum(c) for c in _cycles]))
    print(f"{'floor step (µs a cycle)':34} {'p50':>8} {'mean':>8}")
    print(_row("statements", [f[0] for f in floor_rows]))
    print(_row("COMMIT (fsync)", [f[1] for f in floor_rows]))
    print(_row("cycle", [sum(f) for f in floor_rows]))
    rate = statistics.median(rates)
    floor = slots / (statistics.fmean(sum(f) for f in floor_rows) / 1e9)
    print(
        f"engine {rate:,.0f} tasks/s ({1e6 / rate:.1f} µs a task), "
        f"floor {floor:,.0f} tasks/s ({1e6 / floor:.1f} µs a task): {rate / floor:.0%} of floor"
    )


if __name__ == "__main__":
    asyncio.run(main())
