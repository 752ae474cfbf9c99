"""Worker benchmark: the engine side by side with cairnq 0.15.1, same workload.

Rows, per dialect:
- drain 5,000 no-op tasks at concurrency 8, single-task handlers;
- the same with ``batch=64``;
- ``call()`` latency p50/p95 with default polls, the worker in this process;
- the same with the worker in another process.

Each row runs on a fresh database (a new SQLite file, a new Postgres schema),
prefilled outside the timed section. Usage:

    python bench/worker_bench.py --dialect sqlite|postgres|both [--tasks 5000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import cairnq

import engine
from engine.store.postgres import PostgresStore
from engine.store.sqlite import SQLiteStore

DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/test"
CONCURRENCY = 8
BATCH = 64


class Target:
    """A fresh database of one dialect: its location and how each side opens it."""

    def __init__(self, dialect: str, dsn: str, workdir: str) -> None:
        self.dialect = dialect
        self.dsn = dsn
        tag = uuid.uuid4().hex[:10]
        self.path = os.path.join(workdir, f"{tag}.db")
        self.schema = f"bench_{tag}"

    def engine_store(self) -> engine.TaskStore:
        if self.dialect == "sqlite":
            return SQLiteStore(self.path)
        return PostgresStore(self.dsn, schema=self.schema, max_size=10)

    def client(self, side: str) -> Any:
        if side == "engine":
            return engine.CairnQ(self.engine_store())
        if self.dialect == "sqlite":
            return cairnq.CairnQ.sqlite(self.path)
        return cairnq.CairnQ.postgres(self.dsn, schema=self.schema)

    def worker(self, side: str, store: Any) -> Any:
        module = engine if side == "engine" else cairnq
        return module.Worker(store, ["default"], concurrency=CONCURRENCY)

    def args(self) -> list[str]:
        return [self.dialect, self.path if self.dialect == "sqlite" else self.dsn, self.schema]

    def drop(self) -> None:
        if self.dialect == "postgres":
            import psycopg

            with psycopg.connect(self.dsn, autocommit=True) as conn:
                conn.execute(f'drop schema if exists "{self.schema}" cascade')


async def prefill(target: Target, count: int, name: str) -> None:
    """Submit ``count`` tasks through the engine (not timed; rows are identical)."""
    async with engine.CairnQ(target.engine_store()) as client:
        for start in range(0, count, 250):
            chunk = range(start, min(count, start + 250))
            await asyncio.gather(*(client.submit(name, {"i": i}) for i in chunk))


async def drain(side: str, target: Target, count: int, batch: int | None) -> float:
    """Tasks per second for one worker draining ``count`` queued no-op tasks."""
    await prefill(target, count, "noop")
    client = target.client(side)
    await client.connect()
    worker = target.worker(side, client.store)
    done = asyncio.Event()
    seen = 0

    def count_done(n: int) -> None:
        nonlocal seen
        seen += n
        if seen >= count:
            done.set()

    if batch is None:

        async def noop(ctx: Any, payload: Any) -> None:
            count_done(1)

        worker.register("noop", noop)
    else:

        async def noop_batch(ctxs: list[Any]) -> None:
            count_done(len(ctxs))

        worker.register("noop", noop_batch, batch=batch)
    started = time.perf_counter()
    async with worker.background():
        await done.wait()
        # Handlers ran; now wait for their settlements to land.
        while (await client.stats("default"))["default"]["succeeded"] < count:
            await asyncio.sleep(0.005)
        elapsed = time.perf_counter() - started
    await client.close()
    return count / elapsed


async def call_latency(side: str, target: Target, calls: int, in_process: bool) -> list[float]:
    """``call()`` round trips in ms with default polls."""
    client = target.client(side)
    await client.connect()
    latencies: list[float] = []

    async def measure() -> None:
        await client.call("echo", {"x": 0})  # warm up
        for i in range(calls):
            t0 = time.perf_counter()
            await client.call("echo", {"x": i})
            latencies.append((time.perf_counter() - t0) * 1000)

    if in_process:
        worker = target.worker(side, client.store)

        async def echo(ctx: Any, payload: Any) -> Any:
            return payload

        worker.register("echo", echo)
        async with worker.background():
            await measure()
    else:
        proc = subprocess.Popen(
            [sys.executable, __file__, "--serve-worker", side, *target.args()],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert proc.stdout is not None
            proc.stdout.readline()  # "ready"
            await measure()
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    await client.close()
    return latencies


def serve_worker(side: str, dialect: str, location: str, schema: str) -> None:
    """Entry point of the out-of-process worker (default polls)."""
    module = engine if side == "engine" else cairnq
    if dialect == "sqlite":
        worker = module.Worker.sqlite(location, concurrency=CONCURRENCY)
    else:
        worker = module.Worker.postgres(location, schema=schema, concurrency=CONCURRENCY)

    async def echo(ctx: Any, payload: Any) -> Any:
        return payload

    worker.register("echo", echo)
    print("ready", flush=True)
    worker.serve()


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def run_row(
    dialect: str, dsn: str, workdir: str, measure: Callable[[str, Target], Awaitable[Any]]
) -> dict[str, Any]:
    out = {}
    for side in ("engine", "cairnq"):
        target = Target(dialect, dsn, workdir)
        try:
            out[side] = await measure(side, target)
        finally:
            target.drop()
    return out


async def bench_dialect(dialect: str, dsn: str, tasks: int, calls: int, peer_calls: int) -> None:
    workdir = tempfile.mkdtemp(prefix="worker_bench_")
    print(f"\n== {dialect} ==  (engine vs cairnq {cairnq.__version__})")
    if dialect == "sqlite":
        print("durability: both sides synchronous=FULL (each one's default)")
    else:
        print("durability: both sides one WAL flush per COMMIT (the server's default)")
    print(f"{'row':44} {'engine':>12} {'cairnq':>12} {'ratio':>8}")
    for label, batch in ((f"drain {tasks} no-op, concurrency 8 (tasks/s)", None),
                         (f"drain {tasks} no-op, batch=64 (tasks/s)", BATCH)):  # fmt: skip
        rates = await run_row(
            dialect, dsn, workdir, lambda side, t, b=batch: drain(side, t, tasks, b)
        )
        ratio = rates["engine"] / rates["cairnq"]
        print(f"{label:44} {rates['engine']:12.0f} {rates['cairnq']:12.0f} {ratio:7.1f}x")
    for where, in_process in (("same process", True), ("other process", False)):

        async def measure(side: str, target: Target, inp: bool = in_process) -> list[float]:
            n = calls if side == "engine" else peer_calls
            return await call_latency(side, target, n, inp)

        lat = await run_row(dialect, dsn, workdir, measure)
        for q, name in ((0.5, "p50"), (0.95, "p95")):
            e, c = pct(lat["engine"], q), pct(lat["cairnq"], q)
            label = f"call() {name}, worker in {where} (ms)"
            print(f"{label:44} {e:12.2f} {c:12.2f} {c / e:7.1f}x")
    print(
        f"(call rows: {calls} engine calls, {peer_calls} cairnq calls; ratio = engine/cairnq "
        "for throughput, cairnq/engine for latency)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dialect", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--dsn", default=os.environ.get("CAIRNQ_TEST_PG_DSN", DEFAULT_DSN))
    parser.add_argument("--tasks", type=int, default=5_000)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--peer-calls", type=int, default=30)
    parser.add_argument("--serve-worker", nargs=4, metavar=("SIDE", "DIALECT", "LOC", "SCHEMA"))
    args = parser.parse_args()
    if args.serve_worker:
        serve_worker(*args.serve_worker)
        return
    dialects = ["sqlite", "postgres"] if args.dialect == "both" else [args.dialect]
    for dialect in dialects:
        asyncio.run(bench_dialect(dialect, args.dsn, args.tasks, args.calls, args.peer_calls))


if __name__ == "__main__":
    main()
