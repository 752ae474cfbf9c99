"""The ``cairnq-tui`` command: ``launch [TARGET]`` opens the console on a database.

Bad input never ends in a traceback: a target that does not answer or is not a
cairnq database prints one short message on stderr and exits with status 2.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

from cairnq_tui import __version__
from cairnq_tui.target import TargetError, check_target, make_store, parse_target, redact

EXIT_BAD_TARGET = 2


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (also what ``--help`` prints)."""
    parser = argparse.ArgumentParser(
        prog="cairnq-tui",
        description="An operations console for cairnq task queues (SQLite or Postgres).",
    )
    parser.add_argument("--version", action="version", version=f"cairnq-tui {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    launch = commands.add_parser(
        "launch",
        help="watch and operate a cairnq database",
        description="Open the console on TARGET: a SQLite file or a postgres:// DSN.",
    )
    launch.add_argument(
        "target",
        nargs="?",
        metavar="TARGET",
        help="SQLite path or postgres:// DSN (default ./tasks.db, created when missing)",
    )
    launch.add_argument("--schema", help="Postgres schema holding the cairnq tables")
    launch.add_argument(
        "--queue",
        action="append",
        dest="queues",
        metavar="QUEUE",
        help="show only this queue (repeatable)",
    )
    launch.add_argument(
        "--read-only",
        action="store_true",
        help="open the database read-only; every control is disabled",
    )
    launch.add_argument(
        "--refresh",
        type=_positive_float,
        default=1.0,
        metavar="SECONDS",
        help="refresh interval (default 1)",
    )
    launch.add_argument("--theme", help="Textual theme name (e.g. textual-dark, nord)")
    return parser


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.05 <= value <= 3600:
        raise argparse.ArgumentTypeError("must be between 0.05 and 3600 seconds")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command != "launch":
        parser.print_help()
        return 0 if args.command is None and argv == [] else EXIT_BAD_TARGET
    return launch(args)


def launch(args: argparse.Namespace) -> int:
    """Open the target, then run the console until the operator quits."""
    from cairnq_tui.app import ConsoleApp, Settings

    try:
        target = parse_target(args.target, args.schema)
        notice = asyncio.run(check_target(target, read_only=args.read_only))
        store = make_store(target, read_only=args.read_only)
    except TargetError as exc:
        print(f"cairnq-tui: {exc}", file=sys.stderr)
        return EXIT_BAD_TARGET
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # never a traceback for the operator; say what broke
        print(
            f"cairnq-tui: cannot open {redact(str(args.target or 'tasks.db'))}: "
            f"{type(exc).__name__}: {redact(str(exc))}",
            file=sys.stderr,
        )
        return EXIT_BAD_TARGET
    settings = Settings(
        target=target,
        read_only=args.read_only,
        queues=tuple(args.queues or ()),
        refresh_s=args.refresh,
        theme=args.theme,
        notice=notice,
    )
    app = ConsoleApp(store, settings)
    if args.theme and args.theme not in app.available_themes:
        print(
            f"cairnq-tui: unknown theme {args.theme!r}; "
            f"choose one of {', '.join(sorted(app.available_themes))}",
            file=sys.stderr,
        )
        return EXIT_BAD_TARGET
    app.run()
    return app.return_code or 0


if __name__ == "__main__":
    sys.exit(main())
