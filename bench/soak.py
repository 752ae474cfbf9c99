"""Soak: mixed traffic for a long time with periodic worker kills, on both dialects.

Per dialect (a temporary SQLite file; a private Postgres cluster started for the
run on its own port) it keeps running:

* one long-lived worker that is never killed (its memory is sampled);
* ``--workers`` churn workers, one of which is killed with SIGKILL every
  ``--kill-every`` seconds and replaced at once;
* two submitters at ``--rate`` tasks/s each: a mix of single and batched tasks,
  a quarter keyed (one submitter ``reuse``, the other ``replace`` on the same
  keys), one in ten failing once on purpose;
* the console, headless, refreshing every second (its memory is sampled).

Every ``--sample`` seconds one line per dialect: tasks terminal, live, kills,
and the resident memory of the long-lived worker and of the console. At the
end everything is drained and checked with the reliability checker
(``tests/reliability/reliability_harness.py``): tasks processed, redeliveries,
the longest delay from a kill to the re-run of a task the victim held (and,
polled twice a second, the longest a lease stayed expired unrecovered), tasks
lost and duplicates beyond at-least-once (both must be 0), memory growth.

    python bench/soak.py                      # 30 minutes, both dialects
    python bench/soak.py --minutes 3 --dialects sqlite

Exit status 1 when a task was lost or run twice without a reason.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "reliability"))

from reliability_harness import (  # noqa: E402
    Ledger,
    PrivatePostgres,
    Target,
    check_run,
    kill9,
    proc_args,
    rss_kib,
    spawn,
    stop,
    wait_drained,
)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--minutes", type=float, default=30.0)
    p.add_argument("--dialects", default="sqlite,postgres")
    p.add_argument("--workers", type=int, default=3, help="churn workers per dialect")
    p.add_argument("--kill-every", type=float, default=15.0, help="seconds between kills")
    p.add_argument("--rate", type=float, default=40.0, help="submits/s per submitter")
    p.add_argument("--lease-ms", type=int, default=2000)
    p.add_argument("--work-ms", type=float, default=50.0, help="mean handler time")
    p.add_argument("--sample", type=float, default=10.0, help="seconds between status lines")
    p.add_argument("--no-console", action="store_true")
    p.add_argument("--keep", action="store_true", help="keep the databases and ledgers")
    p.add_argument("--out", default=str(REPO / "bench" / "out" / "soak.json"))
    p.add_argument("--console-only", nargs="+", metavar="ARG", help=argparse.SUPPRESS)
    return p.parse_args(argv)


@dataclass
class Side:
    """One dialect's fleet."""

    name: str
    target: Target
    ledger_dir: Path
    lease_ms: int
    work_ms: float
    steady: Any = None
    churn: list[Any] = field(default_factory=list)
    submitters: list[Any] = field(default_factory=list)
    console: Any = None
    orchestrator: Ledger | None = None
    #: (seconds since start, KiB) per sampled process
    rss: dict[str, list[tuple[float, int]]] = field(
        default_factory=lambda: {"worker": [], "console": []}
    )
    kills: int = 0
    #: longest time a lease stayed expired but unrecovered, as observed by polling
    max_overdue_ms: int = 0
    reported_overdue: set[str] = field(default_factory=set)

    def worker(self, *extra: str) -> Any:
        return spawn(
            "proc_worker.py",
            *proc_args(self.target, self.ledger_dir),
            "--lease-ms", str(self.lease_ms), "--work-ms", str(self.work_ms), *extra,
        )  # fmt: skip

    def counts(self) -> tuple[int, int]:
        try:
            row = self.target.rows(
                "select count(*) as n, sum(case when status in ('queued','running')"
                " then 1 else 0 end) as live from cairnq_tasks"
            )[0]
        except Exception:
            return -1, -1
        return int(row["n"]), int(row["live"] or 0)


def start_side(name: str, args: argparse.Namespace, root: Path, pg: PrivatePostgres | None) -> Side:
    if name == "sqlite":
        target = Target("sqlite", str(root / "soak.db"))
    else:
        assert pg is not None
        target = Target("postgres", pg.dsn, "soak")
    side = Side(name, target, root / f"ledger-{name}", args.lease_ms, args.work_ms)
    side.ledger_dir.mkdir(parents=True)
    side.orchestrator = Ledger(side.ledger_dir, "orchestrator")
    side.steady = side.worker("--concurrency", "4")
    side.churn = [side.worker() for _ in range(args.workers)]
    count = int(args.rate * args.minutes * 60)
    for i, conflict in enumerate(("reuse", "replace")):
        mix = ["--count", str(count), "--rate", str(args.rate), "--parallel", "4"]
        mix += ["--conflict", conflict, "--fail-every", "10", "--seed", str(i)]
        mix += ["--max-attempts", "10"]
        side.submitters.append(
            spawn("proc_submitter.py", *proc_args(target, side.ledger_dir), *mix)
        )
    if not args.no_console:
        side.console = spawn_console(target, root)
    return side


def spawn_console(target: Target, root: Path) -> Any:
    """The console, headless, in its own process (``soak.py --console-only ...``)."""
    extra = [target.dialect, target.location, target.schema or ""]
    with open(root / f"console-{target.dialect}.err", "wb") as err:
        return subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--console-only", *extra],
            cwd=str(REPO),
            stdout=subprocess.DEVNULL,
            stderr=err,
        )


def run_console(dialect: str, location: str, schema: str) -> None:
    """Run the console headless on a target until SIGTERM, refreshing every second."""
    from cairnq_tui.app import ConsoleApp, Settings
    from cairnq_tui.target import Target as ConsoleTarget
    from engine import PostgresStore, SQLiteStore

    store: Any
    if dialect == "sqlite":
        store = SQLiteStore(location)
    else:
        store = PostgresStore(location, schema=schema or None, max_size=2)
    target = ConsoleTarget(location, dialect, f"soak {dialect}", schema or None)
    ConsoleApp(store, Settings(target=target, refresh_s=1.0)).run(headless=True, size=(160, 50))


def sample(side: Side, elapsed: float) -> str:
    for role, proc in (("worker", side.steady), ("console", side.console)):
        if proc is not None:
            rss = rss_kib(proc.pid)
            if rss is not None:
                side.rss[role].append((elapsed, rss))
    total, live = side.counts()
    w = side.rss["worker"][-1][1] if side.rss["worker"] else 0
    c = side.rss["console"][-1][1] if side.rss["console"] else 0
    return (
        f"{side.name:8} tasks {total:7} live {live:5} kills {side.kills:4}"
        f"  rss worker {w / 1024:6.1f} MiB console {c / 1024:6.1f} MiB"
        f"  max lease overdue {side.max_overdue_ms} ms"
    )


def watch_leases(side: Side) -> None:
    """Track expired leases nobody recovered yet; explain any that stays overdue > 3 s."""
    now = int(time.time() * 1000)
    try:
        rows = side.target.rows(
            "select id, worker_id, lease_until_ms from cairnq_tasks"
            " where status = 'running' and lease_until_ms is not null and lease_until_ms < ?",
            [now],
        )
    except Exception:
        return
    for row in rows:
        overdue = now - int(row["lease_until_ms"])
        side.max_overdue_ms = max(side.max_overdue_ms, overdue)
        if overdue > 3000 and row["id"] not in side.reported_overdue:
            side.reported_overdue.add(row["id"])
            print(f"  {side.name}: lease of {row['id']} ({row['worker_id']}) overdue {overdue} ms")
            if side.target.dialect == "postgres":
                for act in side.target.rows(
                    "select pid, state, wait_event_type, wait_event,"
                    " (now() - xact_start)::text as in_xact, left(query, 60) as query"
                    " from pg_stat_activity where datname = current_database()"
                    " and pid <> pg_backend_pid() and state <> 'idle'"
                ):
                    print(f"    backend {act}")


def kill_one(side: Side, rng: random.Random) -> None:
    victim = rng.choice(side.churn)
    kill9(victim, side.orchestrator)
    side.churn.remove(victim)
    side.churn.append(side.worker())
    side.kills += 1


def growth(samples: list[tuple[float, int]], run_s: float) -> dict[str, float] | None:
    """RSS once warmed up (first sample after max(30 s, 10 % of the run)) and at the end, MiB."""
    warm = [kib for t, kib in samples if t >= max(30.0, run_s / 10)]
    if len(warm) < 2:
        return None
    return {
        "after_warmup_mib": round(warm[0] / 1024, 1),
        "end_mib": round(warm[-1] / 1024, 1),
        "growth_mib": round((warm[-1] - warm[0]) / 1024, 1),
    }


def finish(side: Side, timeout_s: float, run_s: float) -> dict[str, Any]:
    for proc in side.submitters:
        stop(proc, timeout=30)
    wait_drained(side.target, timeout_s)
    for proc in [side.steady, *side.churn]:
        stop(proc, timeout=30)
    if side.console is not None:
        stop(side.console, timeout=10)
    assert side.orchestrator is not None
    side.orchestrator.close()
    verdict = check_run(side.target, side.ledger_dir)
    return {
        "dialect": side.name,
        "tasks_processed": sum(verdict.statuses.values()),
        "statuses": dict(verdict.statuses),
        "acknowledged_submits": verdict.submitted,
        "kills": verdict.kills,
        "redeliveries": verdict.reruns_after_loss,
        "redeliveries_after_kill": verdict.reruns_after_kill,
        "redeliveries_after_planned_failure": verdict.reruns_after_failure,
        "redeliveries_after_lost_lease": verdict.reruns_after_lost_lease,
        "max_recovery_ms_after_kill": verdict.max_recovery_ms,
        "lease_ms": side.lease_ms,
        "max_lease_overdue_ms_observed": side.max_overdue_ms,
        "lost": len(verdict.lost),
        "duplicates_beyond_at_least_once": len(verdict.unexplained_reruns)
        + len(verdict.settled_twice)
        + len(verdict.double_dispatch),
        "wrong_result": len(verdict.wrong_result),
        "errors_seen_by_processes": dict(verdict.errors),
        "executions_per_task": dict(verdict.executions),
        "worker_rss": growth(side.rss["worker"], run_s),
        "console_rss": growth(side.rss["console"], run_s) if side.console else "not run",
        "failures": verdict.failures(),
    }


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.console_only:
        dialect, location, schema = [*args.console_only, "", "", ""][:3]
        run_console(dialect, location, schema)
        return 0
    rng = random.Random()
    dialects = [d for d in args.dialects.split(",") if d]
    root = Path(tempfile.mkdtemp(prefix="cairnq-soak-"))
    pg = PrivatePostgres().start() if "postgres" in dialects else None
    sides: list[Side] = []
    try:
        sides = [start_side(d, args, root, pg) for d in dialects]
        started = time.monotonic()
        end = started + args.minutes * 60
        next_kill = started + args.kill_every
        next_sample = started
        next_watch = started
        while time.monotonic() < end:
            now = time.monotonic()
            if now >= next_kill:
                for side in sides:
                    kill_one(side, rng)
                next_kill += args.kill_every
            if now >= next_watch:
                for side in sides:
                    watch_leases(side)
                next_watch += 0.5
            if now >= next_sample:
                elapsed = now - started
                for side in sides:
                    print(f"[{elapsed:7.0f}s] {sample(side, elapsed)}", flush=True)
                next_sample += args.sample
            time.sleep(0.2)
        results = [finish(side, 120, args.minutes * 60) for side in sides]
    finally:
        for side in sides:
            for proc in [side.steady, *side.churn, *side.submitters, side.console]:
                if proc is not None and proc.poll() is None:
                    stop(proc, timeout=5)
        if pg is not None:
            pg.stop()
        if args.keep:
            print(f"databases and ledgers kept in {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    report = {
        "minutes": args.minutes,
        "kill_every_s": args.kill_every,
        "durability": "SQLite: synchronous=FULL (the engine's default); Postgres: server default",
        "results": results,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))
    return 1 if any(r["lost"] or r["duplicates_beyond_at_least_once"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
