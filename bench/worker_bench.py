"""Worker benchmark: the engine side by side with cairnq 0.15.1, same workload.

Rows, per dialect:
- drain 5,000 no-op tasks at concurrency 8, single-task handlers;
- the same with ``batch=64``;
- ``call()`` latency p50/p95 with default polls, the worker in this process;
- the same with the worker in another process;
- backlog (engine only): submit and drain rates with 10k and 100k tasks (1M
  with ``--backlog-1m``) already in the table, queued and terminal mixed;
- memory (engine only): a worker in its own process drains ``--memory-tasks``
  queued tasks (batch=64) and prints its peak RSS.

The drain rows print a floor: the bare statements of one worker cycle (one
transaction: complete the tasks that finished, recover leases, claim their
replacements, COMMIT; no probe, since the completions write anyway), run back
to back on one connection of the same database at the same durability, as
tasks/s. Beside each row, the engine's commits per task (from its store's
committing calls during that drain). No worker can settle and refill
its slots faster than that on this machine (bench/README.md).

Each row runs on a fresh database (a new SQLite file, a new Postgres schema),
prefilled outside the timed section. Usage:

    python bench/worker_bench.py --dialect sqlite|postgres|both [--tasks 5000]
        [--backlog 10000,100000] [--backlog-1m] [--memory-tasks 100000]
        [--skip-calls] [--only-calls] [--calls 200] [--peer-calls 30]

The call rows print a floor too: three bare commits in sequence (a call needs a
submit, a claim and a complete, each durable before the next can start), one
statement and one commit each (raw sqlite3 at synchronous=FULL, bare psycopg),
measured just before the call rows (and again after them, in the footnote).
On Postgres a table follows them: the engine's call() phase by phase (submit,
the worker's wake, its claim session, the handler, the settlement, the
waiter's wake and read), p50s of a second, traced pass of the same loop in
each placement (``call_phases.py``), with cairnq's call p50s beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import cairnq
import call_phases  # type: ignore[import-not-found]

import engine
from engine._sql import statement
from engine.store._base import LEASE_EXPIRED_JSON
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


class WriteCount:
    """The engine store's committing calls during a drain, counted per kind.

    Each wrapped call is one commit (one transaction), except a completing
    claim whose shared transaction failed (then the completions commit
    alone: two) and a claim session whose probe found nothing (none). Group
    commit could merge lone ``complete``/``fail`` writes, so their count is
    an upper bound; the drain rows' no-op handlers make none of them.
    """

    KINDS = ("claim_session", "claim_session_completing", "complete_many", "complete", "fail")

    def __init__(self, store: Any) -> None:
        self.calls: dict[str, int] = dict.fromkeys(self.KINDS, 0)
        self.commits = 0
        self.settled_in_claims = 0
        for kind in self.KINDS:
            setattr(store, kind, self._wrap(kind, getattr(store, kind)))

    def _wrap(self, kind: str, method: Callable[..., Awaitable[Any]]) -> Callable[..., Any]:
        async def counted(*args: Any, **kwargs: Any) -> Any:
            out = await method(*args, **kwargs)
            self.calls[kind] += 1
            if kind == "claim_session":
                self.commits += out is not None
            elif kind == "claim_session_completing":
                self.commits += 1 + (out.claim_error is not None)
                self.settled_in_claims += len(out.settled)
            else:
                self.commits += 1
            return out

        return counted


#: The last engine drain's write count (printed beside its row).
LAST_WRITES: list[WriteCount] = []


async def drain(side: str, target: Target, count: int, batch: int | None) -> float:
    """Tasks per second for one worker draining ``count`` queued no-op tasks."""
    await prefill(target, count, "noop")
    client = target.client(side)
    await client.connect()
    if side == "engine":
        LAST_WRITES[:] = [WriteCount(client.store)]
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
        await settled(side, client, worker, count)
        elapsed = time.perf_counter() - started
    await client.close()
    return count / elapsed


async def settled(side: str, client: Any, worker: Any, count: int) -> None:
    """Wait until the drained tasks' settlements are durable.

    The engine releases a call's slot only once its settlement committed, so an
    empty call list says so without reading the table (a count over a large
    backlog would cost more than the drain). cairnq is asked for its stats.
    """
    if side == "engine":
        while worker.snapshot().calls:
            await asyncio.sleep(0.002)
        return
    while (await client.stats("default"))["default"]["succeeded"] < count:
        await asyncio.sleep(0.005)


async def call_latency(
    side: str, target: Target, calls: int, in_process: bool, traced: bool = False
) -> Any:
    """``call()`` round trips in ms with default polls.

    ``traced`` (engine, Postgres): the same loop with every call's phases stamped
    (``call_phases``); returns the phases' p50s instead of the latencies.
    """
    client = target.client(side)
    await client.connect()
    latencies: list[float] = []
    caller = call_phases.CallerStamps()
    worker_stamps: dict[str, dict[str, Any]] = {}
    stamps = call_phases.WorkerStamps(lambda s: worker_stamps.__setitem__(s["id"], s))
    spy = call_phases.Spy(target.dsn) if traced else None
    trace_file = os.path.join(os.path.dirname(target.path), f"trace_{target.schema}.jsonl")
    if traced:
        caller.attach(client.store)

    async def measure() -> None:
        await client.call("echo", {"x": 0})  # warm up
        for i in range(calls):
            t0 = time.perf_counter()
            if traced:
                with caller.call():
                    await client.call("echo", {"x": i})
            else:
                await client.call("echo", {"x": i})
            latencies.append((time.perf_counter() - t0) * 1000)

    try:
        if in_process:
            worker = target.worker(side, client.store)
            if traced:
                stamps.attach(client.store)

            async def echo(ctx: Any, payload: Any) -> Any:
                if traced:
                    stamps.handler(ctx.task_id)
                return payload

            worker.register("echo", echo)
            async with worker.background():
                await measure()
        else:
            env = dict(os.environ)
            if traced:
                env[call_phases.TRACE_FILE_ENV] = trace_file
            proc = subprocess.Popen(
                [sys.executable, __file__, "--serve-worker", side, *target.args()],
                stdout=subprocess.PIPE,
                text=True,
                env=env,
            )
            try:
                assert proc.stdout is not None
                proc.stdout.readline()  # "ready"
                await measure()
            finally:
                proc.terminate()
                proc.wait(timeout=30)
            worker_stamps = call_phases.read_trace_file(trace_file)
    finally:
        await client.close()
        if spy is not None:
            spy.close()
    if spy is not None:
        return call_phases.phase_p50s(call_phases.join(caller, worker_stamps, spy))
    return latencies


def serve_worker(side: str, dialect: str, location: str, schema: str) -> None:
    """Entry point of the out-of-process worker (default polls)."""
    module = engine if side == "engine" else cairnq
    if dialect == "sqlite":
        worker = module.Worker.sqlite(location, concurrency=CONCURRENCY)
    else:
        worker = module.Worker.postgres(location, schema=schema, concurrency=CONCURRENCY)
    trace_file = os.environ.get(call_phases.TRACE_FILE_ENV)
    stamps = None
    if trace_file and side == "engine":
        stamps = call_phases.WorkerStamps(call_phases.file_sink(trace_file))
        stamps.attach(worker.store)

    async def echo(ctx: Any, payload: Any) -> Any:
        if stamps is not None:
            stamps.handler(ctx.task_id)
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


async def commit_floor_ms(dialect: str, dsn: str, workdir: str, n: int = 100) -> float:
    """p50 of one bare committed single-row insert (raw sqlite3 FULL / bare psycopg), ms."""
    samples: list[float] = []
    if dialect == "sqlite":
        name = f"floor_{uuid.uuid4().hex[:8]}.db"
        conn = sqlite3.connect(os.path.join(workdir, name), isolation_level=None)
        conn.execute("pragma journal_mode=wal")
        conn.execute("pragma synchronous=full")
        conn.execute("create table t (id integer primary key, v text)")
        for i in range(n):
            t0 = time.perf_counter()
            conn.execute("insert into t (v) values (?)", (str(i),))
            samples.append((time.perf_counter() - t0) * 1000)
        conn.close()
    else:
        import psycopg

        schema = f"bench_floor_{uuid.uuid4().hex[:8]}"
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as aconn:
            await aconn.execute(f'create schema "{schema}"')
            try:
                await aconn.execute(f'create table "{schema}".t (id serial primary key, v text)')
                for i in range(n):
                    t0 = time.perf_counter()
                    await aconn.execute(f'insert into "{schema}".t (v) values (%s)', (str(i),))
                    samples.append((time.perf_counter() - t0) * 1000)
            finally:
                await aconn.execute(f'drop schema "{schema}" cascade')
    return pct(samples, 0.5)


async def bench_dialect(
    dialect: str,
    dsn: str,
    tasks: int,
    calls: int,
    peer_calls: int,
    with_calls: bool = True,
    with_drains: bool = True,
) -> None:
    workdir = tempfile.mkdtemp(prefix="worker_bench_")
    print(f"\n== {dialect} ==  (engine vs cairnq {cairnq.__version__})")
    if dialect == "sqlite":
        print("durability: both sides synchronous=FULL (each one's default)")
    else:
        print("durability: both sides one WAL flush per COMMIT (the server's default)")
    print(
        f"{'row':44} {'engine':>12} {'cairnq':>12} {'ratio':>8} {'floor':>10} {'commits/task':>13}"
    )
    if with_drains:
        await drain_rows(dialect, dsn, workdir, tasks)
    if not with_calls:
        return
    floor_before = await commit_floor_ms(dialect, dsn, workdir)
    cairnq_p50: dict[str, float] = {}
    for where, in_process in (("same process", True), ("other process", False)):

        async def measure(side: str, target: Target, inp: bool = in_process) -> list[float]:
            n = calls if side == "engine" else peer_calls
            return await call_latency(side, target, n, inp)

        lat = await run_row(dialect, dsn, workdir, measure)
        cairnq_p50[where] = pct(lat["cairnq"], 0.5)
        for q, name in ((0.5, "p50"), (0.95, "p95")):
            e, c = pct(lat["engine"], q), pct(lat["cairnq"], q)
            label = f"call() {name}, worker in {where} (ms)"
            floor = f"{3 * floor_before:10.2f}" if name == "p50" else ""
            print(f"{label:44} {e:12.2f} {c:12.2f} {c / e:7.1f}x {floor}".rstrip())
    floor_after = await commit_floor_ms(dialect, dsn, workdir)
    if dialect == "postgres":
        await phase_rows(dsn, workdir, calls, cairnq_p50)
    bare = "raw sqlite3 insert, synchronous=FULL" if dialect == "sqlite" else "bare psycopg insert"
    print(
        f"(call floor: 3 commits in sequence, p50 of one {bare}: {floor_before:.2f} ms "
        f"before the call rows, {floor_after:.2f} ms after)"
    )
    print(
        f"(call rows: {calls} engine calls, {peer_calls} cairnq calls; ratio = engine/cairnq "
        "for throughput, cairnq/engine for latency)"
    )


async def phase_rows(dsn: str, workdir: str, calls: int, cairnq_p50: dict[str, float]) -> None:
    """The engine's call() on Postgres, phase by phase (p50s of traced calls, ms)."""
    columns: dict[str, dict[str, float | None]] = {}
    for where, in_process in (("same process", True), ("other process", False)):
        target = Target("postgres", dsn, workdir)
        try:
            columns[where] = await call_latency("engine", target, calls, in_process, traced=True)
        finally:
            target.drop()
    print(
        f"\ncall() phases, engine, p50 of {calls} traced calls each (ms; a phase is the gap "
        "between two stamps, so p50s need not add up)"
    )
    print(f"{'phase':44} {'same proc':>12} {'other proc':>12}")

    def cell(value: float | None) -> str:
        return f"{value:12.2f}" if value is not None else f"{'-':>12}"

    for label in columns["same process"]:
        same, other = columns["same process"].get(label), columns["other process"].get(label)
        print(f"{label:44} {cell(same)} {cell(other)}")
    same_c, other_c = cairnq_p50.get("same process"), cairnq_p50.get("other process")
    print(f"{'cairnq call() p50 (its call row above)':44} {cell(same_c)} {cell(other_c)}")


# -- drain rows, their floor, backlog and memory (issue 12) -----------------------------


async def drain_rows(dialect: str, dsn: str, workdir: str, tasks: int) -> None:
    """The two drain rows, engine vs cairnq, each with its floor."""
    for label, batch in ((f"drain {tasks} no-op, concurrency 8 (tasks/s)", None),
                         (f"drain {tasks} no-op, batch=64 (tasks/s)", BATCH)):  # fmt: skip
        rates = await run_row(
            dialect, dsn, workdir, lambda side, t, b=batch: drain(side, t, tasks, b)
        )
        slots = CONCURRENCY * (batch or 1)
        floor = await cycle_floor(Target(dialect, dsn, workdir), tasks, slots)
        ratio = rates["engine"] / rates["cairnq"]
        writes = LAST_WRITES[0]
        print(
            f"{label:44} {rates['engine']:12.0f} {rates['cairnq']:12.0f} {ratio:7.1f}x "
            f"{floor:10.0f} {writes.commits / tasks:13.4f}"
        )
        calls = ", ".join(f"{k} {v}" for k, v in writes.calls.items() if v)
        print(
            f"  (engine: {writes.commits} commits for {tasks} tasks, {writes.settled_in_claims} "
            f"settled inside claims; calls: {calls}; floor: 1/{slots} commits/task)"
        )


def _sqlite(name: str) -> str:
    return statement("sqlite", name)


def _pg(name: str) -> str:
    return statement("postgres", name)


async def cycle_floor(target: Target, count: int, slots: int) -> float:
    """Tasks/s of the bare statements of worker cycles, one COMMIT per cycle.

    A cycle is what the engine's worker does per refill: one transaction (no
    probe: the completions open it anyway) completing the ``slots`` tasks
    claimed by the previous cycle, recovering expired leases and claiming
    ``slots`` more, then COMMIT. The
    statements are the engine's own (sql/), on one connection, at the same
    durability (SQLite synchronous=FULL; Postgres's default WAL flush).
    """
    await prefill(target, count, "noop")
    cycles = max(1, count // slots)
    try:
        if target.dialect == "sqlite":
            return await asyncio.to_thread(_sqlite_floor, target.path, cycles, slots)
        return await asyncio.to_thread(_pg_floor, target.dsn, target.schema, cycles, slots)
    finally:
        remove(target)


def _sqlite_floor(
    path: str, cycles: int, slots: int, split: list[tuple[int, int]] | None = None
) -> float:
    """Tasks/s of the floor's cycles; ``split`` gets each cycle's (statements, COMMIT) in ns."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("pragma synchronous = full")
    settle = _sqlite("complete_many")
    recover, claim = _sqlite("recover_leases"), _sqlite("claim_one_queue")
    held: list[str] = []
    started = time.perf_counter()
    for _ in range(cycles):
        begun = time.perf_counter_ns()
        now = int(time.time() * 1000)
        conn.execute("begin immediate")
        conn.execute(settle, {"ids": json.dumps(held), "worker_id": "w", "now_ms": now})
        conn.execute(recover, {"lease_expired_error": LEASE_EXPIRED_JSON, "now_ms": now})
        rows = conn.execute(
            claim,
            {"queue": "default", "names": None, "limit": slots, "worker_id": "w",
             "now_ms": now, "lease_until_ms": now + 30_000},
        ).fetchall()  # fmt: skip
        held = [r[0] for r in rows]
        statements = time.perf_counter_ns()
        conn.execute("commit")
        if split is not None:
            split.append((statements - begun, time.perf_counter_ns() - statements))
    elapsed = time.perf_counter() - started
    conn.close()
    return cycles * slots / elapsed


def _pg_floor(dsn: str, schema: str, cycles: int, slots: int) -> float:
    import psycopg

    options = f"-c search_path={schema}"
    settle = _pg("complete_many")
    recover, claim = _pg("recover_leases"), _pg("claim_one_queue")
    held: list[str] = []
    with psycopg.connect(dsn, autocommit=True, options=options) as conn:
        started = time.perf_counter()
        for _ in range(cycles):
            # One round trip, as the engine's worker sends it (pipeline mode).
            with conn.pipeline():
                conn.execute("begin")
                conn.execute(settle, {"ids": held, "worker_id": "w"})
                conn.execute(recover, {"lease_expired_error": LEASE_EXPIRED_JSON})
                cur = conn.execute(
                    claim,
                    {"queue": "default", "names": None, "limit": slots, "worker_id": "w",
                     "lease_ms": 30_000},
                )  # fmt: skip
                conn.execute("commit")
                held = [r[0] for r in cur.fetchall()]
        elapsed = time.perf_counter() - started
    return cycles * slots / elapsed


#: Backlog rows: how many of each kind per 4 rows of backlog. Terminal rows
#: (succeeded) and delayed queued rows share the drained queue; the rest wait on
#: another queue. The claim, the probe and recovery must step over all of them.
_BACKLOG_SQLITE = """
with recursive n(i) as (select 1 union all select i + 1 from n where i < :count)
insert into cairnq_tasks (id, name, queue, status, payload, metadata, attempt,
    max_attempts, priority, worker_id, run_at_ms, created_at_ms, updated_at_ms,
    completed_at_ms, progress)
select 'task_' || printf('%026d', i), 'old', iif(i % 4 = 3, 'other', 'default'),
    iif(i % 4 < 2, 'succeeded', 'queued'), '{"i":' || i || '}', '{}', iif(i % 4 < 2, 1, 0),
    3, 0, iif(i % 4 < 2, 'worker_old', null),
    iif(i % 4 = 2, :now + 86400000, :now - 60000), :now - 60000, :now - 60000,
    iif(i % 4 < 2, :now - 60000, null), iif(i % 4 < 2, 1.0, null)
from n
"""
_BACKLOG_PG = """
insert into cairnq_tasks (id, name, queue, status, payload, metadata, attempt,
    max_attempts, priority, worker_id, run_at_ms, created_at_ms, updated_at_ms,
    completed_at_ms, progress)
select 'task_' || lpad(i::text, 26, '0'), 'old',
    case when mod(i, 4) = 3 then 'other' else 'default' end,
    case when mod(i, 4) < 2 then 'succeeded' else 'queued' end,
    jsonb_build_object('i', i), '{}'::jsonb, case when mod(i, 4) < 2 then 1 else 0 end,
    3, 0, case when mod(i, 4) < 2 then 'worker_old' end,
    case when mod(i, 4) = 2 then %(now)s + 86400000 else %(now)s - 60000 end,
    %(now)s - 60000, %(now)s - 60000,
    case when mod(i, 4) < 2 then %(now)s - 60000 end,
    case when mod(i, 4) < 2 then 1.0 end
from generate_series(1, %(count)s) as i
"""


async def build_backlog(target: Target, count: int) -> float:
    """Create the schema through the engine, then bulk-insert ``count`` rows; seconds."""
    store = target.engine_store()
    await store.connect()
    await store.close()
    started = time.perf_counter()
    now = int(time.time() * 1000)
    if target.dialect == "sqlite":

        def fill() -> None:
            with contextlib.closing(sqlite3.connect(target.path, isolation_level=None)) as conn:
                conn.execute("begin immediate")
                conn.execute(_BACKLOG_SQLITE, {"count": count, "now": now})
                conn.execute("commit")
                # A long-running database has statistics (the engine refreshes
                # them every minute); an empty one's would mislead the planner.
                conn.execute("analyze")
                conn.execute("pragma wal_checkpoint(truncate)")

    else:

        def fill() -> None:
            import psycopg

            options = f"-c search_path={target.schema}"
            with psycopg.connect(target.dsn, autocommit=True, options=options) as conn:
                conn.execute(_BACKLOG_PG, {"count": count, "now": now})
                # What autovacuum would get to soon after a bulk insert; done
                # here so it does not run during the timed rows instead.
                conn.execute("vacuum analyze cairnq_tasks")

    await asyncio.to_thread(fill)
    return time.perf_counter() - started


async def submit_rate(target: Target, count: int) -> float:
    """Engine submits/s, ``asyncio.gather`` groups of 64, into a queue nobody drains."""
    async with engine.CairnQ(target.engine_store()) as client:
        started = time.perf_counter()
        for start in range(0, count, 64):
            chunk = range(start, min(count, start + 64))
            await asyncio.gather(
                *(client.submit("sub", {"i": i}, queue="submitted") for i in chunk)
            )
        return count / (time.perf_counter() - started)


async def backlog_rows(dialect: str, dsn: str, workdir: str, sizes: list[int], tasks: int) -> None:
    """Engine rates with a backlog already in the table, per backlog size."""
    print(f"\nbacklog (engine only; {tasks} tasks per rate; backlog = 1/2 succeeded,")
    print(" 1/4 queued but due tomorrow on the drained queue, 1/4 queued on another queue)")
    print(f"{'backlog':>10} {'build s':>8} {'submit/s':>10} {'drain c=8':>10} {'batch=64':>10}")
    for size in sizes:
        target = Target(dialect, dsn, workdir)
        try:
            built = await build_backlog(target, size)
            submits = await submit_rate(target, tasks)
            single = await drain("engine", target, tasks, None)
            batched = await drain("engine", target, tasks, BATCH)
        finally:
            remove(target)
        print(f"{size:>10,} {built:8.1f} {submits:10.0f} {single:10.0f} {batched:10.0f}")


_QUEUED_SQLITE = """
with recursive n(i) as (select 1 union all select i + 1 from n where i < :count)
insert into cairnq_tasks (id, name, queue, status, payload, metadata, run_at_ms,
    created_at_ms, updated_at_ms)
select 'task_' || printf('%026d', i), 'noop', 'default', 'queued', '{"i":' || i || '}',
    '{}', :now, :now, :now
from n
"""
_QUEUED_PG = """
insert into cairnq_tasks (id, name, queue, status, payload, metadata, run_at_ms,
    created_at_ms, updated_at_ms)
select 'task_' || lpad(i::text, 26, '0'), 'noop', 'default', 'queued',
    jsonb_build_object('i', i), '{}'::jsonb, %(now)s, %(now)s, %(now)s
from generate_series(1, %(count)s) as i
"""


async def memory_row(dialect: str, dsn: str, workdir: str, count: int) -> None:
    """A worker process drains ``count`` queued tasks (batch=64); its peak RSS."""
    target = Target(dialect, dsn, workdir)
    try:
        store = target.engine_store()
        await store.connect()
        await store.close()
        now = int(time.time() * 1000)
        if dialect == "sqlite":

            def fill() -> None:
                with contextlib.closing(sqlite3.connect(target.path, isolation_level=None)) as c:
                    c.execute("begin immediate")
                    c.execute(_QUEUED_SQLITE, {"count": count, "now": now})
                    c.execute("commit")
                    c.execute("analyze")
                    c.execute("pragma wal_checkpoint(truncate)")

        else:

            def fill() -> None:
                import psycopg

                options = f"-c search_path={target.schema}"
                with psycopg.connect(target.dsn, autocommit=True, options=options) as c:
                    c.execute(_QUEUED_PG, {"count": count, "now": now})
                    c.execute("analyze cairnq_tasks")

        await asyncio.to_thread(fill)
        out = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, __file__, "--drain-process", *target.args(), str(count)],
            capture_output=True,
            text=True,
            check=True,
        )
        rate, start_mb, peak_mb = out.stdout.split()
        print(
            f"\nmemory: a worker process drained {count:,} queued tasks (batch=64, "
            f"concurrency 8) at {float(rate):,.0f} tasks/s; RSS {float(start_mb):.0f} MB after "
            f"start, peak {float(peak_mb):.0f} MB (target < 150 MB)"
        )
    finally:
        remove(target)


def remove(target: Target) -> None:
    """Drop the target's schema, or delete its SQLite files (a 1M backlog is ~450 MB)."""
    target.drop()
    if target.dialect == "sqlite":
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.remove(target.path + suffix)


def _peak_rss_mb() -> float:
    """This process's peak RSS (VmHWM), in MB."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def drain_process(dialect: str, location: str, schema: str, count: int) -> None:
    """Entry point of the memory row's worker: drain, then print rate, RSS at start, peak."""

    async def run() -> tuple[float, float]:
        store: engine.TaskStore
        if dialect == "sqlite":
            store = SQLiteStore(location)
        else:
            store = PostgresStore(location, schema=schema, max_size=4)
        await store.connect()
        start_mb = _peak_rss_mb()
        worker = engine.Worker(store, ["default"], concurrency=CONCURRENCY)
        done = asyncio.Event()
        seen = 0

        async def noop_batch(ctxs: list[Any]) -> None:
            nonlocal seen
            seen += len(ctxs)
            if seen >= count:
                done.set()

        worker.register("noop", noop_batch, batch=BATCH)
        started = time.perf_counter()
        async with worker.background():
            await done.wait()
            await settled("engine", None, worker, count)
            elapsed = time.perf_counter() - started
        await store.close()
        return count / elapsed, start_mb

    rate, start_mb = asyncio.run(run())
    print(f"{rate} {start_mb} {_peak_rss_mb()}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dialect", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--dsn", default=os.environ.get("CAIRNQ_TEST_PG_DSN", DEFAULT_DSN))
    parser.add_argument("--tasks", type=int, default=5_000)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--peer-calls", type=int, default=30)
    parser.add_argument("--serve-worker", nargs=4, metavar=("SIDE", "DIALECT", "LOC", "SCHEMA"))
    parser.add_argument("--skip-calls", action="store_true", help="leave out the call() rows")
    parser.add_argument("--only-calls", action="store_true", help="only the call() rows")
    parser.add_argument(
        "--backlog", default="10000,100000", help="backlog sizes, comma-separated ('' = none)"
    )
    parser.add_argument("--backlog-1m", action="store_true", help="add a 1,000,000 backlog")
    parser.add_argument("--memory-tasks", type=int, default=100_000, help="0 = no memory row")
    parser.add_argument("--drain-process", nargs=4, metavar=("DIALECT", "LOC", "SCHEMA", "N"))
    args = parser.parse_args()
    if args.serve_worker:
        serve_worker(*args.serve_worker)
        return
    if args.drain_process:
        dialect, location, schema, count = args.drain_process
        drain_process(dialect, location, schema, int(count))
        return
    sizes = [int(n) for n in args.backlog.split(",") if n.strip()]
    if args.backlog_1m:
        sizes.append(1_000_000)
    dialects = ["sqlite", "postgres"] if args.dialect == "both" else [args.dialect]
    for dialect in dialects:
        asyncio.run(
            bench_dialect(
                dialect,
                args.dsn,
                args.tasks,
                args.calls,
                args.peer_calls,
                with_calls=not args.skip_calls,
                with_drains=not args.only_calls,
            )
        )
        if args.only_calls:
            continue
        workdir = tempfile.mkdtemp(prefix="worker_bench_")
        if sizes:
            asyncio.run(backlog_rows(dialect, args.dsn, workdir, sizes, args.tasks))
        if args.memory_tasks:
            asyncio.run(memory_row(dialect, args.dsn, workdir, args.memory_tasks))


if __name__ == "__main__":
    main()
