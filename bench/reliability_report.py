"""Full-size runs of the reliability fleet scenarios, with their figures.

CI runs scenarios 2 and 3 at a reduced load (``tests/reliability``); this runs
them at the issue's size and prints what the checker found:

* scenario 2 — 4 worker processes and 2 submitters on one SQLite file;
* scenario 3 — the same on Postgres (a private cluster started for the run),
  restarted once a third of the submits were acknowledged (``3``: a clean
  ``-m fast`` restart; ``3i``: ``-m immediate``, i.e. a server crash).

    python bench/reliability_report.py [--tasks 20000] [--scenarios 2,3]
    CAIRNQ_REL_IMPL=cairnq python bench/reliability_report.py   # the SDK, for reference

Writes ``bench/out/reliability.json`` and prints a Markdown table. Exit status 1
when a task was lost, settled twice or run again without a reason.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "reliability"))

from reliability_harness import (  # noqa: E402
    FleetResult,
    PrivatePostgres,
    Target,
    impl,
    run_fleet,
    run_fleet_across_restart,
)


def row(scenario: str, load: str, faults: str, result: FleetResult, **extra: Any) -> dict[str, Any]:
    v = result.verdict
    return {
        "scenario": scenario,
        "load": load,
        "faults": faults,
        "elapsed_s": round(result.elapsed_s, 1),
        "tasks_per_s": round(result.throughput(), 1),
        "lost": len(v.lost),
        "duplicates_beyond_at_least_once": len(v.unexplained_reruns)
        + len(v.settled_twice)
        + len(v.double_dispatch),
        "keys_with_two_live_tasks": len(result.key_worst),
        "key_samples": result.key_samples,
        "stale_settles": len(v.stale_settles),
        "crashes": sum("Traceback" in e for e in result.stderr),
        **v.summary(),
        **extra,
    }


def scenario_2(tasks: int, root: Path) -> dict[str, Any]:
    target = Target("sqlite", str(root / "s2.db"))
    result = run_fleet(
        target,
        root / "s2-ledger",
        tasks=tasks,
        submitter_args=["--fail-every", "10"],
        timeout_s=900,
    )
    load = (
        f"{tasks:,} submits (1/4 keyed), 4 workers + 2 submitters, one SQLite file "
        "(synchronous=FULL, each implementation's default)"
    )
    return row("2 SQLite fleet", load, "1 in 10 tasks fails once", result)


def scenario_3(tasks: int, root: Path, mode: str = "fast") -> dict[str, Any]:
    server = PrivatePostgres().start()
    try:
        run = run_fleet_across_restart(
            server, Target("postgres", server.dsn, "s3"), root / f"s3-{mode}-ledger",
            tasks=tasks, mode=mode, timeout_s=900,
        )  # fmt: skip
    finally:
        server.stop()
    load = f"{tasks:,} submits (1/4 keyed), 4 workers (own pools) + 2 submitters"
    return row(
        "3 Postgres fleet + restart",
        load,
        f"server restart -m {mode} ({run.restart_ms} ms) at 1/3; 1 in 10 tasks fails once",
        run.result,
        errors_during_restart=run.errors_during,
        errors_after_recovery_window=len(run.late_errors),
        settled_after_restart=run.settled_after,
    )


def markdown(rows: list[dict[str, Any]]) -> str:
    head = (
        "| scenario | load | faults injected | time | tasks lost"
        " | duplicates beyond at-least-once | re-runs (failure / lease) | stale settles |"
    )
    lines = [head, "|" + "---|" * 8]
    for r in rows:
        lines.append(
            f"| {r['scenario']} | {r['load']} | {r['faults']} | {r['elapsed_s']} s"
            f" ({r['tasks_per_s']}/s) | {r['lost']} | {r['duplicates_beyond_at_least_once']}"
            f" | {r['reruns_after_planned_failure']} / {r['reruns_after_lost_lease']}"
            f" | {r['stale_settles']} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--tasks", type=int, default=20_000)
    p.add_argument("--scenarios", default="2,3,3i", help="3i: restart -m immediate (a crash)")
    p.add_argument("--out", default=str(REPO / "bench" / "out" / "reliability.json"))
    args = p.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="cairnq-reliability-"))
    runs = {
        "2": scenario_2,
        "3": scenario_3,
        "3i": lambda tasks, root: scenario_3(tasks, root, "immediate"),
    }
    rows = []
    try:
        for name in args.scenarios.split(","):
            rows.append(runs[name](args.tasks, root))
            print(json.dumps(rows[-1], indent=2), flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"impl": impl(), "rows": rows}, indent=2))
    print(markdown(rows))
    bad = any(
        r["lost"] or r["duplicates_beyond_at_least_once"] or r["keys_with_two_live_tasks"]
        for r in rows
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
