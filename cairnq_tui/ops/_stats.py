"""``stats``: per queue and name, counts by status, the oldest due age, recent failures.

Built from the console's Queues view reads: ``Inspector.queue_counts`` (per
queue), ``Inspector.count_tasks`` per name within a queue (index-backed, capped
like every count of the console), ``Inspector.queue_latency`` (the oldest due
queued task), ``Inspector.recent_finished`` (a queue's failures over the last
hour) and ``Inspector.metrics`` (a name's).
"""

from __future__ import annotations

import argparse
from typing import Any

from cairnq_tui.formatting import duration
from cairnq_tui.ops._common import (
    EXIT_OK,
    add_target_arguments,
    emit_json,
    opened,
    positive_int,
    table,
)
from engine import STATUSES
from engine.inspection import DEFAULT_COUNT_CAP, CappedCount, Inspector, TaskFilter

HOUR_MS = 3_600_000


def add_parser(commands: Any, example: str) -> None:
    parser = commands.add_parser(
        "stats",
        help="counts per queue and name, oldest due age, failures in the last hour",
        description="Per queue, and per task name within it: tasks by status (each count "
        "capped like the console's), the age of the oldest due queued task, and the "
        "failures of the last hour.",
        epilog=example,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_target_arguments(parser)
    parser.add_argument(
        "--cap",
        type=positive_int,
        default=DEFAULT_COUNT_CAP,
        help=f"stop each count at this many (default {DEFAULT_COUNT_CAP:,})",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per line")


async def _per_name(
    inspector: Inspector, queue: str, names: list[str], cap: int
) -> dict[str, dict[str, CappedCount]]:
    out: dict[str, dict[str, CappedCount]] = {}
    for name in names:
        counts = {
            status: await inspector.count_tasks(
                TaskFilter(status=status, queue=queue, name=name), cap=cap
            )
            for status in STATUSES
        }
        if any(c is not None and c.value for c in counts.values()):
            out[name] = {s: c for s, c in counts.items() if c is not None}
    return out


async def collect(inspector: Inspector, cap: int) -> list[dict[str, Any]]:
    """One record per queue (``name`` None) followed by one per name within it."""
    now = inspector.clock()
    per_queue = await inspector.queue_counts(cap=cap)
    latency = await inspector.queue_latency()
    failed = await inspector.recent_finished(window_ms=HOUR_MS)
    names = await inspector.names()
    # The Metrics view's read: per queue and name, what finished in the last hour.
    history = await inspector.metrics(window_ms=HOUR_MS, buckets=1)
    failed_by_name = {(m.queue, m.name): sum(m.failed) for m in history.series}
    records: list[dict[str, Any]] = []
    for queue, counts in per_queue.items():
        due = latency.get(queue)
        oldest = due.oldest_due_ms if due is not None else None
        records.append(
            _record(queue, None, counts, cap, oldest, now, failed.get(queue, {}).get("failed", 0))
        )
        for name, by_status in (await _per_name(inspector, queue, names, cap)).items():
            last_hour = failed_by_name.get((queue, name), 0)
            records.append(_record(queue, name, by_status, cap, None, now, last_hour))
    return records


def _record(
    queue: str,
    name: str | None,
    counts: dict[str, CappedCount],
    cap: int,
    oldest_due_ms: int | None,
    now: int,
    failed_last_hour: int | None,
) -> dict[str, Any]:
    return {
        "queue": queue,
        "name": name,
        "counts": {s: counts[s].value for s in STATUSES if s in counts},
        "capped": sorted(s for s, c in counts.items() if c.at_least),
        "count_cap": cap,
        "oldest_due_age_s": None if oldest_due_ms is None else max(0, now - oldest_due_ms) / 1000,
        "failed_last_hour": failed_last_hour,
    }


async def run(args: argparse.Namespace) -> int:
    async with opened(args) as found:
        records = await collect(found.inspector, args.cap)
    if args.json:
        for record in records:
            emit_json(record)
        return EXIT_OK
    if not records:
        print("No tasks: the database holds no queue yet.")
        return EXIT_OK
    rows = []
    for r in records:
        shown = {s: f"{n:,}" + ("+" if s in r["capped"] else "") for s, n in r["counts"].items()}
        age = r["oldest_due_age_s"]
        rows.append(
            [
                r["queue"] if r["name"] is None else "",
                "(all)" if r["name"] is None else r["name"],
                *(shown.get(s, "0") for s in STATUSES),
                "" if age is None else duration(int(age * 1000)),
                "" if r["failed_last_hour"] is None else f"{r['failed_last_hour']:,}",
            ]
        )
    table(["QUEUE", "NAME", *(s.upper() for s in STATUSES), "OLDEST DUE", "FAILED 1H"], rows)
    return EXIT_OK
