"""How the console copes with a big database: 1,000,000 tasks on SQLite.

Builds (once, cached under ``bench/out/``) a SQLite database migrated by the engine
and bulk-filled with stdlib ``sqlite3`` in one transaction: mixed statuses, 20
queues, 50 names, keys on 10% of the tasks, creation times over the last week.
Then runs the console headless (``App.run_test``) and prints:

- start to first full paint (the tasks table filled and drawn);
- database time of one refresh tick, p50/p95 over 30 ticks;
- keypress to repaint for a status filter and for a key-prefix search;
- peak RSS of the process.

Targets: first paint < 1.5 s, tick p95 < 50 ms, filter/search < 200 ms, RSS < 250 MB.

Then the failure-triage rows (bench/triage_rows.py, on a database of their own with
100,000 failures, cached in the temp directory): failure groups <= 1 s, error
search p95 <= 150 ms, metrics over 24 h <= 1 s; ``--pg DSN`` adds them on Postgres.

Then the recorder rows (bench/recorder_rows.py): the recorder's share of a refresh
tick (<= 5%) and the history file after a simulated week (<= 50 MB).

Usage: ``python bench/console_bench.py [--tasks N] [--rebuild] [--pg DSN] [--triage-only]
[--recorder-only] [--recorder-days D]``
"""

from __future__ import annotations

import argparse
import asyncio
import random
import resource
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

QUEUES = [f"queue-{i:02d}" for i in range(20)]
NAMES = [f"job.{i:02d}" for i in range(50)]
# (status, share): mostly finished work, a backlog, a few running.
STATUS_MIX = [
    ("succeeded", 0.70),
    ("failed", 0.08),
    ("canceled", 0.04),
    ("queued", 0.1798),
    ("running", 0.0002),
]
CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
WEEK_MS = 7 * 24 * 3600 * 1000


def _ulid(ms: int, rng: random.Random) -> str:
    head = "".join(CROCKFORD[(ms >> shift) & 31] for shift in range(45, -1, -5))
    return head + "".join(rng.choices(CROCKFORD, k=16))


def migrate(path: Path) -> None:
    """Create the cairnq schema with the engine's own migrations."""
    from engine.store.sqlite import SQLiteStore

    async def run() -> None:
        store = SQLiteStore(str(path))
        await store.connect()
        await store.close()

    asyncio.run(run())


def fill(path: Path, count: int, *, now_ms: int, seed: int = 7) -> None:
    """Bulk-insert ``count`` tasks (and keys on 10%) in one transaction."""
    rng = random.Random(seed)
    statuses = [s for s, _ in STATUS_MIX]
    weights = [w for _, w in STATUS_MIX]
    start = now_ms - WEEK_MS
    step = WEEK_MS / count
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("pragma journal_mode=wal")
    conn.execute("pragma synchronous=off")
    conn.execute("begin")
    tasks = []
    keys = []
    for i in range(count):
        created = int(start + i * step)
        task_id = "task_" + _ulid(created, rng)
        status = rng.choices(statuses, weights)[0]
        queue = QUEUES[i % len(QUEUES)]
        name = NAMES[rng.randrange(len(NAMES))]
        attempt = 0 if status == "queued" else rng.randint(1, 3)
        completed = (
            created + rng.randint(10, 60_000)
            if status in ("succeeded", "failed", "canceled")
            else None
        )
        lease = now_ms + rng.randint(-5_000, 30_000) if status == "running" else None
        worker = f"worker_{i % 7:02d}" if status != "queued" else None
        error = (
            '{"type":"ValueError","code":"handler_error","message":"boom","retryable":true,"details":{}}'
            if status == "failed"
            else None
        )
        run_at = created + (rng.randint(0, 3_600_000) if rng.random() < 0.1 else 0)
        tasks.append(
            (
                task_id,
                name,
                queue,
                status,
                f'{{"n":{i},"user":"u{i % 5000}"}}',
                None,
                error,
                "{}",
                1.0 if status == "succeeded" else None,
                None,
                attempt,
                3,
                rng.choice((0, 0, 0, 5)),
                worker,
                lease,
                run_at,
                None,
                None,
                task_id,
                None,
                created,
                completed or created,
                completed,
            )
        )
        if i % 10 == 0:
            keys.append((f"order-{i:08d}", task_id, created, created))
        if len(tasks) >= 50_000:
            _flush(conn, tasks, keys)
    _flush(conn, tasks, keys)
    conn.execute("commit")
    conn.execute("analyze")
    conn.close()


def _flush(
    conn: sqlite3.Connection, tasks: list[tuple[object, ...]], keys: list[tuple[object, ...]]
) -> None:
    conn.executemany(f"insert into cairnq_tasks values ({','.join('?' * 23)})", tasks)
    conn.executemany("insert into cairnq_task_keys values (?, ?, ?, ?)", keys)
    tasks.clear()
    keys.clear()


def build(path: Path, count: int, *, rebuild: bool = False) -> Path:
    """The cached benchmark database, built when missing (or asked to)."""
    if path.exists() and not rebuild:
        return path
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    migrate(path)
    fill(path, count, now_ms=int(time.time() * 1000))
    print(f"built {path} ({count:,} tasks) in {time.perf_counter() - started:.1f} s")
    return path


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def measure(path: Path, count: int) -> dict[str, float]:
    """Run the console headless on ``path`` and time what an operator waits for."""
    from textual.widgets import Input, Select

    from cairnq_tui.app import ConsoleApp, Settings
    from cairnq_tui.target import make_store, parse_target
    from cairnq_tui.widgets.queues_view import QueuesView
    from cairnq_tui.widgets.tasks_view import TasksView

    painted: list[float] = []

    class TimedApp(ConsoleApp):
        """Records when each refresh result reached the screen."""

        def refresh_drawn(self, message: Any) -> None:
            super().refresh_drawn(message)
            # Runs after the next screen update, i.e. once the new rows are painted.
            self.call_after_refresh(lambda: painted.append(time.perf_counter()))

    target = parse_target(str(path))
    started = time.perf_counter()
    app = TimedApp(make_store(target, read_only=False), Settings(target=target, refresh_s=3600))
    results: dict[str, float] = {}
    async with app.run_test(size=(160, 50)) as pilot:

        async def drawn() -> float:
            """Wait for the next painted refresh; when it was painted."""
            count = len(painted)
            for _ in range(10_000):
                await pilot.pause(0.001)
                if len(painted) > count and not app._in_flight:
                    break
            return painted[-1]

        first = await drawn()
        view = app.screen.query_one(TasksView)
        assert view.table.row_count == 50, view.table.row_count
        results["first_paint_s"] = first - started

        costs = []
        for _ in range(30):
            app.refresh_now(force=True)
            await drawn()
            bar = app.status_bar()
            assert bar is not None and bar.cost_ms is not None
            costs.append(bar.cost_ms)
        results["tick_p50_ms"] = _percentile(costs, 0.5)
        results["tick_p95_ms"] = _percentile(costs, 0.95)

        t0 = time.perf_counter()
        view.query_one("#status-filter", Select).value = "failed"
        done = await drawn()
        assert all(
            str(view.table.get_row(k)[4]).startswith("failed") for k in view.table.row_keys()
        )
        results["status_filter_ms"] = (done - t0) * 1000
        results["status_filter_db_ms"] = app.status_bar().cost_ms  # type: ignore[union-attr]

        view.query_one("#status-filter", Select).clear()
        view.query_one("#search-kind", Select).value = "key"
        search = view.query_one("#search", Input)
        search.focus()
        wanted = f"order-{count // 2 // 10 * 10:08d}"
        search.value = wanted[:-1]
        await drawn()
        search.action_end()  # focusing selected the text; type after it instead
        t0 = time.perf_counter()
        await pilot.press(wanted[-1])
        done = await drawn()
        got = [str(view.table.get_row(k)[7]) for k in view.table.row_keys()]
        assert got == [wanted], (got, wanted, view.filter)
        results["key_search_ms"] = (done - t0) * 1000
        results["key_search_db_ms"] = app.status_bar().cost_ms  # type: ignore[union-attr]

        app.action_show_view("queues")
        await drawn()
        queue_costs = []
        for _ in range(10):
            app.refresh_now(force=True)
            await drawn()
            queue_costs.append(app.status_bar().cost_ms)  # type: ignore[union-attr]
        results["queues_tick_p50_ms"] = _percentile(queue_costs, 0.5)
        results["queues_tick_max_ms"] = max(queue_costs)
        assert app.screen.query_one(QueuesView).table.row_count == len(QUEUES)
    results["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return results


TARGETS = {
    "first_paint_s": ("start to first full paint", 1.5, "s"),
    "tick_p50_ms": ("refresh tick DB time p50 (Tasks view)", None, "ms"),
    "tick_p95_ms": ("refresh tick DB time p95 (Tasks view)", 50.0, "ms"),
    "status_filter_ms": ("status filter, change to repaint", 200.0, "ms"),
    "status_filter_db_ms": ("  of which database", None, "ms"),
    "key_search_ms": ("key search, keypress to repaint", 200.0, "ms"),
    "key_search_db_ms": ("  of which database", None, "ms"),
    "queues_tick_p50_ms": ("Queues view tick p50 (incl. capped counts 1 in 5)", None, "ms"),
    "queues_tick_max_ms": ("Queues view tick max (the capped-count tick)", None, "ms"),
    "peak_rss_mb": ("peak RSS", 250.0, "MB"),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=1_000_000)
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--db", type=Path, help="database path (default bench/out/console_N.db)")
    parser.add_argument("--pg", metavar="DSN", help="also run the failure-triage rows on Postgres")
    parser.add_argument("--triage-only", action="store_true", help="only the failure-triage rows")
    parser.add_argument("--recorder-only", action="store_true", help="only the recorder rows")
    parser.add_argument(
        "--recorder-days", type=float, default=7.0, help="simulated days of the recorder row"
    )
    args = parser.parse_args()
    failed = False
    from recorder_rows import run as run_recorder

    if args.recorder_only:
        lines, missed = run_recorder(days=args.recorder_days)
        print("\n".join(lines))
        return 1 if missed else 0
    if not args.triage_only:
        path = args.db or Path(__file__).parent / "out" / f"console_{args.tasks}.db"
        build(path, args.tasks, rebuild=args.rebuild)
        results = asyncio.run(measure(path, args.tasks))
        print(f"console benchmark: {args.tasks:,} tasks, {len(QUEUES)} queues, {len(NAMES)} names")
        print(
            "durability: bulk fill synchronous=OFF (setup, untimed); "
            "the console's store synchronous=FULL (the default)"
        )
        for key, (label, target, unit) in TARGETS.items():
            value = results[key]
            verdict = ""
            if target is not None:
                ok = value < target
                failed |= not ok
                verdict = f"  (target < {target:g} {unit}: {'ok' if ok else 'MISSED'})"
            print(f"  {label:<52} {value:9.1f} {unit}{verdict}")
    from triage_rows import run as run_triage

    lines, missed = run_triage(args.tasks, args.pg)
    print("\n".join(lines))
    recorder_lines, recorder_missed = run_recorder(days=args.recorder_days)
    print("\n".join(recorder_lines))
    return 1 if failed or missed or recorder_missed else 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.exit(main())
