"""Where a ``call()`` spends its time: per-stage timestamps, worker in this process.

Each call is submit -> (signal) -> the worker's claim -> handler -> complete ->
(signal) -> the caller sees the result. The store's entry points and the signal
hub are wrapped to timestamp the first time each stage is entered or left in a
call; the report gives, per consecutive pair of stages, the minimum and p50 of
the gap (ms). ``--pyinstrument`` profiles the same loop instead.

    python bench/call_profile.py --dialect sqlite|postgres [--calls 300] [--pyinstrument]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import itertools
import os
import tempfile
import time
import uuid
from typing import Any

import engine
from engine.store import _signals
from engine.store.postgres import PostgresStore
from engine.store.sqlite import SQLiteStore

DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/test"
_marks: dict[str, float] = {}


def _mark(name: str) -> None:
    _marks.setdefault(name, time.perf_counter())


def _wrap_async(cls: Any, name: str) -> None:
    original = getattr(cls, name)

    @functools.wraps(original)
    async def timed(self: Any, *args: Any, **kwargs: Any) -> Any:
        _mark(f"{name}>")
        try:
            return await original(self, *args, **kwargs)
        finally:
            _mark(f"<{name}")

    setattr(cls, name, timed)


def _wrap_signal(name: str) -> None:
    original = getattr(_signals.Signals, name)

    def timed(self: Any, *args: Any, **kwargs: Any) -> Any:
        _mark(f"signal {name}")
        return original(self, *args, **kwargs)

    setattr(_signals.Signals, name, timed)


async def profile(dialect: str, dsn: str, calls: int, use_pyinstrument: bool) -> None:
    schema = f"prof_{uuid.uuid4().hex[:8]}"
    store: engine.TaskStore
    if dialect == "sqlite":
        store = SQLiteStore(os.path.join(tempfile.mkdtemp(prefix="call_profile_"), "t.db"))
    else:
        store = PostgresStore(dsn, schema=schema, max_size=10)
    client = engine.CairnQ(store)
    await client.connect()
    worker = engine.Worker(store, ["default"], concurrency=8)

    async def echo(ctx: Any, payload: Any) -> Any:
        _mark("handler")
        return payload

    worker.register("echo", echo)
    if not use_pyinstrument:
        for name in ("submit", "claim_session", "complete", "get", "get_status"):
            _wrap_async(type(store), name)
        _wrap_signal("queued")
        _wrap_signal("done")
    gaps: dict[str, list[float]] = {}
    totals: list[float] = []
    profiler: Any = None
    async with worker.background():
        for i in range(10):  # warm up
            await client.call("echo", {"i": i})
        if use_pyinstrument:
            from pyinstrument import Profiler

            profiler = Profiler(async_mode="enabled")
            profiler.start()
        for i in range(calls):
            _marks.clear()
            t0 = time.perf_counter()
            await client.call("echo", {"i": i})
            t1 = time.perf_counter()
            totals.append((t1 - t0) * 1000)
            points = [("call", t0), *sorted(_marks.items(), key=lambda kv: kv[1]), ("result", t1)]
            for (a, ta), (b, tb) in itertools.pairwise(points):
                gaps.setdefault(f"{a} -> {b}", []).append((tb - ta) * 1000)
        if profiler is not None:
            profiler.stop()
    await client.close()
    if dialect == "postgres":
        import psycopg

        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'drop schema if exists "{schema}" cascade')  # type: ignore[arg-type]
    totals.sort()
    print(f"== {dialect}: {calls} calls, p50 {totals[len(totals) // 2]:.2f} ms, "
          f"p95 {totals[int(len(totals) * 0.95)]:.2f} ms")  # fmt: skip
    if profiler is not None:
        print(profiler.output_text(unicode=False, color=False, show_all=False))
        return
    print(f"{'stage (gap between first marks)':46} {'seen':>5} {'min':>7} {'p50':>7}")
    for label, values in sorted(gaps.items(), key=lambda kv: -len(kv[1])):
        if len(values) < calls // 2:
            continue  # an order seen in few calls (a race), not the chain
        values.sort()
        print(f"{label:46} {len(values):5} {values[0]:7.2f} {values[len(values) // 2]:7.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dialect", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--dsn", default=os.environ.get("CAIRNQ_TEST_PG_DSN", DEFAULT_DSN))
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--pyinstrument", action="store_true")
    args = parser.parse_args()
    asyncio.run(profile(args.dialect, args.dsn, args.calls, args.pyinstrument))


if __name__ == "__main__":
    main()
