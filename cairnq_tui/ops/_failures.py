"""``failures``: the failure groups of the console's Failures view.

``Inspector.failure_groups`` groups the failed tasks of a window by name, error
type and first message line with its volatile parts masked; the command prints
one group per line, most failures first.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from cairnq_tui.ops._common import (
    EXIT_OK,
    add_target_arguments,
    emit_json,
    iso,
    opened,
    positive_int,
    table,
)
from engine.inspection import DEFAULT_ERROR_WINDOW, parse_duration


def _window(text: str) -> int | None:
    if text.strip().lower() == "all":
        return None
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_parser(commands: Any, example: str) -> None:
    parser = commands.add_parser(
        "failures",
        help="failed tasks grouped by name, error type and message (the Failures view)",
        description="Group the tasks of TARGET that failed within the last --since by name, "
        "error type and first message line with numbers, hex, uuids and ids masked: count, "
        "first and last seen, one example task. Most failures first.",
        epilog=example,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_target_arguments(parser)
    parser.add_argument(
        "--since",
        type=_window,
        default=86_400_000,
        metavar="AGE",
        help="the window: failures completed within the last AGE (15m, 24h, 7d), or 'all' "
        "for every one retained (default 24h)",
    )
    parser.add_argument(
        "--cap",
        type=positive_int,
        default=DEFAULT_ERROR_WINDOW,
        help=f"group at most the newest this many failures (default {DEFAULT_ERROR_WINDOW:,})",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per group")


async def run(args: argparse.Namespace) -> int:
    async with opened(args) as found:
        groups = await found.inspector.failure_groups(window_ms=args.since, cap=args.cap)
    records: list[dict[str, Any]] = [
        {
            "name": g.name,
            "error_type": g.error_type,
            "message": g.message,
            "count": g.count,
            "first_seen": iso(g.first_seen_ms),
            "last_seen": iso(g.last_seen_ms),
            "example_id": g.example_id,
        }
        for g in groups.groups
    ]
    if args.json:
        for record in records:
            emit_json(record)
        if groups.capped:
            print(f"cairnq-tui: {groups.window_note}", file=sys.stderr)
        return EXIT_OK
    if not records:
        print(f"No failures in the window ({groups.window_note}).")
        return EXIT_OK
    rows = [
        [
            g.name,
            g.error_type,
            g.message[:60],
            f"{g.count:,}",
            iso(g.first_seen_ms) or "",
            iso(g.last_seen_ms) or "",
            g.example_id,
        ]
        for g in groups.groups
    ]
    table(["NAME", "ERROR", "MESSAGE", "COUNT", "FIRST SEEN", "LAST SEEN", "EXAMPLE"], rows)
    print(f"{len(records)} group(s); {groups.window_note}.")
    return EXIT_OK
