"""The failure-triage rows of the console benchmark (issue 22's figures).

A database of 1,000,000 tasks created over the last week, 100,000 of them failed,
across 20 names and 50 distinct error messages (each with a volatile number, so
masking folds them back into 50), built once and cached in the temp directory
(SQLite: a file; Postgres: a schema). Then, through the engine's Inspector:

- failure groups of the last 24 h and of everything retained (<= 1 s);
- error search, p95 over 20 searches of mixed selectivity (<= 150 ms), and the
  slowest (a text no failure holds: the whole window of the newest 100,000
  failures is read);
- metrics over 24 h (<= 1 s).

Usage: imported by console_bench.py (``--pg DSN`` adds the Postgres rows).
"""

from __future__ import annotations

import asyncio
import os
import random
import sqlite3
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

NAMES = [f"job.{i:02d}" for i in range(20)]
QUEUES = ["default", "mail", "billing", "reports"]
TYPES = ["ValueError", "KeyError", "TimeoutError", "ConnectionError", "RuntimeError"]
MESSAGES = [
    f"step {i} of the {TYPES[i % 5].lower()} path failed for order {{n}}" for i in range(50)
]
CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
WEEK_MS = 7 * 24 * 3_600_000
DAY_MS = 24 * 3_600_000
SEARCHES = [
    *["failed for order"] * 6,  # every failure: the first page fills at once
    *[f"step {i} of" for i in (3, 17, 29, 41, 8, 12)],  # one message in 50
    *[t.lower() for t in TYPES],  # by type
    "order 4242",  # a few
    "timeouterror",
    "no failure says this",  # nothing: the whole window is read
]
TARGETS = {
    "groups_24h_s": ("failure groups, last 24 h", 1.0, "s"),
    "groups_all_s": ("failure groups, everything retained", 1.0, "s"),
    "error_search_p95_ms": ("error search p95 (20 mixed searches)", 150.0, "ms"),
    "error_search_max_ms": ("  slowest (no match: the whole window)", None, "ms"),
    "metrics_24h_s": ("metrics, last 24 h", 1.0, "s"),
}


def _ulid(ms: int, rng: random.Random) -> str:
    head = "".join(CROCKFORD[(ms >> shift) & 31] for shift in range(45, -1, -5))
    return head + "".join(rng.choices(CROCKFORD, k=16))


def _rows(count: int, now_ms: int, seed: int = 11) -> Any:
    rng = random.Random(seed)
    start, step = now_ms - WEEK_MS, WEEK_MS / count
    for i in range(count):
        created = int(start + i * step)
        roll = i % 10
        status = "failed" if roll == 0 else ("queued" if i % 97 == 1 else "succeeded")
        if status == "queued" and created < now_ms - 3_600_000:
            status = "succeeded"
        error = None
        if status == "failed":
            k = rng.randrange(50)
            message = MESSAGES[k].format(n=rng.randrange(100_000))
            error = (
                f'{{"type":"{TYPES[k % 5]}","code":"handler_error","message":"{message}",'
                '"retryable":false,"details":{}}'
            )
        run_at = created + (rng.randint(0, 60_000) if rng.random() < 0.2 else 0)
        completed = run_at + rng.randint(5, 20_000) if status != "queued" else None
        yield (
            "task_" + _ulid(created, rng),
            NAMES[rng.randrange(len(NAMES))],
            QUEUES[i % len(QUEUES)],
            status,
            f'{{"n":{i}}}',
            None,
            error,
            "{}",
            None,
            None,
            1 if status != "queued" else 0,
            1,
            0,
            None,
            None,
            run_at,
            None,
            None,
            None,
            None,
            created,
            completed or created,
            completed,
        )


def build_sqlite(count: int) -> Path:
    """The cached SQLite database (``<tmp>/cairnq-tui-bench/triage_<count>.db``)."""
    path = Path(tempfile.gettempdir()) / "cairnq-tui-bench" / f"triage_{count}.db"
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    from engine import SQLiteStore

    # Built under another name and renamed when whole: an interrupted build is
    # never taken for the cache.
    partial = path.with_name(path.name + ".building")
    for suffix in ("", "-wal", "-shm"):
        Path(f"{partial}{suffix}").unlink(missing_ok=True)

    async def migrate() -> None:
        store = SQLiteStore(str(partial))
        await store.connect()
        await store.close()

    started = time.perf_counter()
    asyncio.run(migrate())
    conn = sqlite3.connect(partial, isolation_level=None)
    conn.execute("pragma synchronous=off")
    conn.execute("begin")
    batch: list[tuple[Any, ...]] = []
    for row in _rows(count, int(time.time() * 1000)):
        batch.append(row)
        if len(batch) >= 50_000:
            conn.executemany(f"insert into cairnq_tasks values ({','.join('?' * 23)})", batch)
            batch.clear()
    conn.executemany(f"insert into cairnq_tasks values ({','.join('?' * 23)})", batch)
    conn.execute("commit")
    conn.execute("analyze")
    conn.execute("pragma wal_checkpoint(truncate)")
    conn.close()
    partial.rename(path)
    print(f"built {path} ({count:,} tasks) in {time.perf_counter() - started:.1f} s")
    return path


def build_postgres(dsn: str, count: int) -> str:
    """The cached Postgres schema ``cairnq_bench_triage_<count>``; returns its name."""
    import psycopg

    from engine import PostgresStore

    schema = f"cairnq_bench_triage_{count}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        found = conn.execute(
            "select 1 from information_schema.tables where table_schema = %s "
            "and table_name = 'cairnq_tasks'",
            (schema,),
        ).fetchone()
        if found:
            cur = conn.execute(f'select count(*) from "{schema}".cairnq_tasks')
            row = cur.fetchone()
            if row is not None and row[0] == count:
                return schema
            conn.execute(f'drop schema "{schema}" cascade')

    async def migrate() -> None:
        store = PostgresStore(dsn, schema=schema, max_size=1)
        await store.connect()
        await store.close()

    started = time.perf_counter()
    asyncio.run(migrate())
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'set search_path to "{schema}"')
        with conn.cursor().copy(
            "copy cairnq_tasks (id, name, queue, status, payload, result, error, metadata, "
            "progress, message, attempt, max_attempts, priority, worker_id, lease_until_ms, "
            "run_at_ms, cancel_requested_at_ms, parent_id, root_id, correlation_id, "
            "created_at_ms, updated_at_ms, completed_at_ms) from stdin"
        ) as copy:
            for row in _rows(count, int(time.time() * 1000)):
                copy.write_row(row)
        # What autovacuum does to a table after a bulk load: statistics, and the
        # visibility map that lets index-only scans skip the heap.
        conn.execute("vacuum analyze cairnq_tasks")
    print(f"built schema {schema} ({count:,} tasks) in {time.perf_counter() - started:.1f} s")
    return schema


#: CPU seconds of this process per measured key (SQLite runs in-process, so this is
#: what the reads cost without waiting for a core on a busy machine).
CPU: dict[str, float] = {}


async def _timed(make: Callable[[], Awaitable[Any]]) -> tuple[float, Any]:
    t0, c0 = time.perf_counter(), time.process_time()
    out = await make()
    CPU["last"] = time.process_time() - c0
    return time.perf_counter() - t0, out


async def measure(store: Any, count_failed: int) -> dict[str, float]:
    from engine.inspection import Inspector, TaskFilter

    await store.connect()
    try:
        # The data's "now" is when it was built (the cache may be older): the
        # newest failure, plus a minute.
        span = await Inspector(store)._read("inspect_failures_span", {"cap": 1})
        built_at = int(span[0]["newest_ms"]) + 60_000
        inspector = Inspector(store, clock=lambda: built_at)
        await inspector.failure_groups(window_ms=DAY_MS)  # warm the page cache once
        results: dict[str, float] = {}
        took, groups = await _timed(lambda: inspector.failure_groups(window_ms=DAY_MS))
        assert 0 < len(groups.groups) <= 50 * len(NAMES), len(groups.groups)
        results["groups_24h_s"], CPU["groups_24h_s"] = took, CPU["last"]
        took, everything = await _timed(lambda: inspector.failure_groups(window_ms=None))
        assert everything.failures_read >= min(100_000, count_failed), everything.window_note
        results["groups_all_s"], CPU["groups_all_s"] = took, CPU["last"]
        times, cpus = [], []
        for text in SEARCHES:
            flt = TaskFilter(search=text, search_kind="error")
            took, page = await _timed(lambda f=flt: inspector.tasks_page(f, limit=50))  # type: ignore[misc]
            assert page.window_note is not None
            times.append(took * 1000)
            cpus.append(CPU["last"] * 1000)
        p95 = min(len(times) - 1, round(0.95 * (len(times) - 1)))
        results["error_search_p95_ms"] = sorted(times)[p95]
        results["error_search_max_ms"] = max(times)
        CPU["error_search_p95_ms"], CPU["error_search_max_ms"] = sorted(cpus)[p95], max(cpus)
        took, metrics = await _timed(lambda: inspector.metrics(window_ms=DAY_MS))
        assert metrics.series and not metrics.capped
        results["metrics_24h_s"], CPU["metrics_24h_s"] = took, CPU["last"]
        return results
    finally:
        await store.close()


def run(count: int, pg_dsn: str | None) -> tuple[list[str], bool]:
    """Build (if needed) and measure; the printed lines and whether a target was missed."""
    from engine import PostgresStore, SQLiteStore

    targets: list[tuple[str, Any]] = [("sqlite", SQLiteStore(str(build_sqlite(count))))]
    if pg_dsn:
        schema = build_postgres(pg_dsn, count)
        targets.append(("postgres", PostgresStore(pg_dsn, schema=schema, max_size=2)))
    lines, missed = [], False
    for dialect, store in targets:
        load = os.getloadavg()[0]
        results = asyncio.run(measure(store, count // 10))
        lines.append(
            f"failure triage ({dialect}): {count:,} tasks, {count // 10:,} failed, "
            f"{len(NAMES)} names, {len(MESSAGES)} messages; load average {load:.1f} -> "
            f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
            + ("; [cpu] = this process's CPU time" if dialect == "sqlite" else "")
        )
        for key, (label, target, unit) in TARGETS.items():
            value = results[key]
            verdict = ""
            if target is not None:
                ok = value <= target
                missed |= not ok
                verdict = f"  (target <= {target:g} {unit}: {'ok' if ok else 'MISSED'})"
            cpu = ""
            if dialect == "sqlite":
                cpu = f" [cpu {CPU[key]:.3f}]" if unit == "s" else f" [cpu {CPU[key]:.0f}]"
            lines.append(f"  {label:<52} {value:9.3f} {unit}{cpu}{verdict}")
    return lines, missed
