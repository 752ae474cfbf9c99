"""``tasks`` (the Tasks list, filtered) and ``show`` (one task, whole), read-only.

The list comes from the console's own reads: ``Inspector.tasks_page`` with a
``TaskFilter``, page after page, and ``Inspector.task_detail`` for one task.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from typing import Any

from cairnq_tui.formatting import duration
from cairnq_tui.ops._common import (
    EXIT_FAILED,
    EXIT_OK,
    BadInput,
    Opened,
    emit_json,
    iso,
    opened,
    table,
)
from engine import STATUSES, Task
from engine.inspection import SORT_KEYS, SearchKind, TaskFilter, TaskSummary, parse_duration

#: Rows read per page while listing.
PAGE = 500


def add_filter_arguments(parser: argparse.ArgumentParser, *, statuses: tuple[str, ...]) -> None:
    """The filters of ``tasks`` (also what ``cancel`` and ``retry`` select with)."""
    parser.add_argument("--status", choices=statuses, help="only tasks in this status")
    parser.add_argument("--name", help="only tasks of this name")
    parser.add_argument("--queue", help="only tasks of this queue")
    parser.add_argument(
        "--key", metavar="PREFIX", help="tasks a key starting with PREFIX points at"
    )
    parser.add_argument("--id", metavar="PREFIX", help="tasks whose id starts with PREFIX")
    parser.add_argument(
        "--error",
        metavar="TEXT",
        help="failed (and retrying) tasks whose error type or message contains TEXT "
        "(searches the newest 100,000 failures, like the console)",
    )
    parser.add_argument(
        "--since",
        type=_since,
        metavar="AGE",
        help="only tasks whose --sort time (default: created) is within the last AGE "
        "(15m, 24h, 7d)",
    )
    parser.add_argument(
        "--sort",
        type=_sort,
        default=("created", True),
        metavar="[-]created|due|updated|completed",
        help="order by this time; a leading - for newest first (default -created)",
    )


def _since(text: str) -> int:
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _sort(text: str) -> tuple[str, bool]:
    key = text.removeprefix("-")
    if key not in SORT_KEYS:
        raise argparse.ArgumentTypeError(
            f"unknown sort {text!r}: one of {', '.join(SORT_KEYS)}, '-' in front for descending"
        )
    return key, text.startswith("-")


#: The row time each sort orders by (the table shows it).
_TIME_COLUMNS = {
    "created": "created_at_ms",
    "due": "run_at_ms",
    "updated": "updated_at_ms",
    "completed": "completed_at_ms",
}
_SEARCHES: tuple[SearchKind, ...] = ("key", "id", "error")


def task_filter(args: argparse.Namespace) -> TaskFilter:
    """The console's ``TaskFilter`` for the filter flags.

    Raises:
        BadInput: more than one of the searches (--key, --id, --error) given.
    """
    searches = [(kind, getattr(args, kind)) for kind in _SEARCHES if getattr(args, kind)]
    if len(searches) > 1:
        raise BadInput("give one of --key, --id and --error (the list searches one way at a time)")
    kind: SearchKind = "id"
    text = None
    if searches:
        kind, text = searches[0]
    sort, descending = args.sort
    since = None if args.since is None else int(time.time() * 1000) - args.since
    try:
        return TaskFilter(
            status=args.status,
            queue=args.queue,
            name=args.name,
            search=text,
            search_kind=kind,
            sort=sort,
            descending=descending,
            since_ms=since,
        )
    except ValueError as exc:
        raise BadInput(str(exc)) from None


def has_filter(args: argparse.Namespace) -> bool:
    names = ("status", "queue", "name", "key", "id", "error", "since")
    return any(getattr(args, k, None) for k in names)


def describe(args: argparse.Namespace) -> str:
    """The filters in words, for "no task matches …"."""
    parts = [f"{k}={getattr(args, k)!r}" for k in ("status", "queue", "name") if getattr(args, k)]
    parts += [f"{k} prefix {getattr(args, k)!r}" for k in ("key", "id") if getattr(args, k)]
    if args.error:
        parts.append(f"error text {args.error!r}")
    if args.since is not None:
        parts.append(f"{args.sort[0]} in the last {duration(args.since)}")
    return ", ".join(parts) or "no filter"


async def list_tasks(
    found: Opened, flt: TaskFilter, limit: int
) -> tuple[list[TaskSummary], str | None]:
    """Up to ``limit`` tasks matching ``flt`` in its order, and what a windowed
    search covered (None when it read no window)."""
    rows: list[TaskSummary] = []
    cursor: str | None = None
    note = None
    while len(rows) < limit:
        page = await found.inspector.tasks_page(
            flt, before=cursor, limit=min(PAGE, limit - len(rows)), total=None
        )
        rows.extend(page.rows)
        note = page.window_note or note
        if not page.has_next:
            break
        cursor = page.last_cursor
    return rows[:limit], note


def error_fields(error: Any) -> tuple[str | None, str | None]:
    """``(type, message)`` of an error envelope (None, None when there is none)."""
    if not isinstance(error, dict):
        return (None, None) if error is None else (None, str(error))
    kind, message = error.get("type"), error.get("message")
    return (
        None if kind is None else str(kind),
        None if message is None else str(message),
    )


def summary_json(row: TaskSummary) -> dict[str, Any]:
    return {
        "id": row.id,
        "name": row.name,
        "queue": row.queue,
        "status": row.status,
        "attempt": row.attempt,
        "max_attempts": row.max_attempts,
        "priority": row.priority,
        "key": row.key,
        "run_at": iso(row.run_at_ms),
        "created_at": iso(row.created_at_ms),
        "updated_at": iso(row.updated_at_ms),
        "completed_at": iso(row.completed_at_ms),
        "error_type": row.error_type,
        "error_message": row.error_message,
        "worker_id": row.worker_id,
    }


def add_parser(commands: Any, example: str) -> None:
    parser = commands.add_parser(
        "tasks",
        help="list tasks, filtered like the console's Tasks list",
        description="List the tasks of TARGET, newest first: a table, or --json lines.",
        epilog=example,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from cairnq_tui.ops._common import add_target_arguments, positive_int

    add_target_arguments(parser)
    add_filter_arguments(parser, statuses=STATUSES)
    parser.add_argument(
        "--limit", type=positive_int, default=50, help="at most this many tasks (default 50)"
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per line")


async def run_tasks(args: argparse.Namespace) -> int:
    flt = task_filter(args)
    async with opened(args) as found:
        rows, note = await list_tasks(found, flt, args.limit)
        keys = await found.inspector.keys_for_tasks([r.id for r in rows if r.key is None])
    rows = [
        r if r.key is not None or r.id not in keys else replace(r, key=keys[r.id][0]) for r in rows
    ]
    if args.json:
        for row in rows:
            emit_json(summary_json(row))
        return EXIT_OK
    searched = f" ({note})" if note else ""
    if not rows:
        print(f"No task matches ({describe(args)}){searched}.")
        return EXIT_OK
    lines = []
    for row in rows:
        error = f"{row.error_type}: {row.error_message or ''}" if row.error_type else ""
        lines.append(
            [
                row.id,
                row.name,
                row.queue,
                row.status,
                f"{row.attempt}/{row.max_attempts}",
                iso(getattr(row, _TIME_COLUMNS[args.sort[0]])) or "",
                error[:80],
            ]
        )
    when = args.sort[0].upper()
    table(["ID", "NAME", "QUEUE", "STATUS", "ATTEMPT", when, "ERROR"], lines)
    more = " (the --limit; there may be more)" if len(rows) == args.limit else ""
    print(f"{len(rows)} task(s){more}{searched}.")
    return EXIT_OK


def task_json(task: Task) -> dict[str, Any]:
    """Every column of a task, times as ISO 8601 UTC (and the epoch ms beside them)."""
    kind, message = error_fields(task.error)
    return {
        "id": task.id,
        "name": task.name,
        "queue": task.queue,
        "status": task.status,
        "attempt": task.attempt,
        "max_attempts": task.max_attempts,
        "priority": task.priority,
        "payload": task.payload,
        "result": task.result,
        "error": task.error,
        "error_type": kind,
        "error_message": message,
        "metadata": task.metadata,
        "progress": task.progress,
        "message": task.message,
        "worker_id": task.worker_id,
        "lease_until": iso(task.lease_until_ms),
        "run_at": iso(task.run_at_ms),
        "cancel_requested_at": iso(task.cancel_requested_at_ms),
        "created_at": iso(task.created_at_ms),
        "updated_at": iso(task.updated_at_ms),
        "completed_at": iso(task.completed_at_ms),
        "parent_id": task.parent_id,
        "root_id": task.root_id,
        "correlation_id": task.correlation_id,
    }


def add_show_parser(commands: Any, example: str) -> None:
    parser = commands.add_parser(
        "show",
        help="one task, whole, as JSON",
        description="Print task ID of TARGET as one JSON object: its columns (payload, "
        "result, error, metadata), the keys pointing at it, its parent and children.",
        epilog=example,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from cairnq_tui.ops._common import add_target_arguments

    add_target_arguments(parser)
    parser.add_argument("id", metavar="ID", help="the task id")
    parser.add_argument(
        "--json", action="store_true", help="accepted for symmetry: show always prints JSON"
    )


async def run_show(args: argparse.Namespace) -> int:
    async with opened(args) as found:
        detail = await found.inspector.task_detail(args.id.strip())
    if detail is None:
        print(f"cairnq-tui: no task {args.id!r} in {found.target.display}", file=sys.stderr)
        return EXIT_FAILED
    out = task_json(detail.task)
    out["keys"] = list(detail.keys)
    out["parent"] = None if detail.parent is None else vars_of(detail.parent)
    out["root"] = None if detail.root is None else vars_of(detail.root)
    out["children"] = [
        {
            "id": c.id,
            "name": c.name,
            "queue": c.queue,
            "status": c.status,
            "created_at": iso(c.created_at_ms),
        }
        for c in detail.children
    ]
    out["children_capped"] = detail.children_capped
    emit_json(out)
    return EXIT_OK


def vars_of(ref: Any) -> dict[str, Any]:
    return {"id": ref.id, "status": ref.status}
