"""The ``cairnq-tui`` command: ``launch [TARGET]`` opens the console on a database;
``demo`` opens it on a fresh database with a hosted demo worker and traffic.

Bad input never ends in a traceback: a target that does not answer or is not a
cairnq database prints one short message on stderr and exits with status 2.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Literal

from cairnq_tui import __version__, ops
from cairnq_tui.exits import EXIT_BAD_TARGET, refused
from cairnq_tui.hosting import HostError, WorkerHost, run_hosting, start_hosting
from cairnq_tui.named_targets import ConfigError, apply_to_args, settings_fields
from cairnq_tui.serve import add_serve_parser, serve
from cairnq_tui.target import (
    TargetError,
    cannot_open,
    check_target,
    make_store,
    parse_target,
)


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
        help="a target NAME from the config file, a SQLite path or a postgres:// DSN "
        "(default ./tasks.db, created when missing)",
    )
    launch.add_argument(
        "--config",
        metavar="FILE",
        help="the config file naming targets (default $XDG_CONFIG_HOME/cairnq-tui/config.toml)",
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
        metavar="SECONDS",
        help="refresh interval (default 1)",
    )
    launch.add_argument(
        "--synchronous",
        choices=["full", "normal"],
        help="SQLite durability of the console's writes and hosted workers: full (default, "
        "every commit fsynced) or normal (faster; an OS crash or power loss can drop "
        "acknowledged commits)",
    )
    launch.add_argument("--theme", help="Textual theme name (e.g. textual-dark, nord)")
    launch.add_argument(
        "--no-history",
        action="store_true",
        help="keep no history file for this target (no recorder, no audit trail)",
    )
    launch.add_argument(
        "--max-depth",
        action="append",
        type=_depth_limit,
        default=[],
        metavar="[QUEUE=]N",
        help="a queue's depth limit, to show its headroom (repeatable; without QUEUE: every queue)",
    )
    launch.add_argument(
        "--worker",
        action="append",
        dest="workers",
        metavar="MODULE:ATTR",
        help="host this engine.Worker (or a function taking the store and returning one) "
        "in the console, on the same database (repeatable)",
    )
    launch.add_argument(
        "--create",
        action="store_true",
        help="create the cairnq tables in an empty Postgres database or a missing --schema "
        "(a hosted --worker does too; a new SQLite file is always created)",
    )
    add_serve_parser(commands, launch)
    ops.add_parsers(commands)
    demo = commands.add_parser(
        "demo",
        help="the console on a fresh database with a demo worker and traffic",
        description="Open the console on a new SQLite database in a temporary folder "
        "(deleted on quit), with the built-in demo worker hosted and a traffic generator.",
    )
    demo.add_argument("--db", metavar="PATH", help="keep the database at PATH instead")
    demo.add_argument(
        "--rate",
        type=_rate,
        default=20.0,
        metavar="N",
        help="tasks submitted per second (default 20)",
    )
    demo.add_argument("--seed", type=int, help="fix the traffic and handler behaviour")
    return parser


def _depth_limit(text: str) -> tuple[str, int]:
    queue, _, number = text.rpartition("=")
    try:
        limit = int(number)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a depth limit: {text!r} (QUEUE=N or N)") from None
    if limit < 1:
        raise argparse.ArgumentTypeError("a depth limit must be >= 1")
    return queue or "*", limit


def _number_within(low: float, high: float, unit: str) -> Callable[[str], float]:
    """An argparse ``type`` for a number from ``low`` to ``high`` (``unit`` names it)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be between {low:g} and {high:g} {unit}")
        return value

    return parse


_positive_float = _number_within(0.05, 3600, "seconds")
_rate = _number_within(0.1, 5000, "tasks per second")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit status."""
    parser = build_parser()
    args = ops.parse_args(parser, argv)
    if args.command == "demo":
        return demo(args)
    if args.command in ops.COMMANDS:
        return ops.run(args)
    if args.command not in ("launch", "serve"):
        parser.print_help()
        return 0 if args.command is None and argv == [] else EXIT_BAD_TARGET
    try:
        apply_to_args(args)  # a target NAME becomes its config's target and defaults
    except ConfigError as exc:
        return refused(str(exc))
    if args.workers and args.read_only:
        return refused("--worker cannot be used with --read-only")
    if args.create and args.read_only:
        return refused("--create cannot be used with --read-only")
    return serve(args) if args.command == "serve" else launch(args)


def run(argv: Sequence[str] | None = None) -> int:
    """The ``cairnq-tui`` console script: ``main``, then a quick interpreter exit.

    Once ``main`` returns, every store is closed, every hosted worker has
    settled or released what it held and the terminal is restored: all that is
    left is the interpreter's own finalization, whose garbage collections walk
    the whole heap (Textual, Rich, the drivers: some 90,000 objects, which the
    app unfroze when it exited). That took 0.8 to 1 s of a 1.1 s quit. Freezing
    the heap first moves every object to the permanent generation, which no
    collection scans; objects are still released by reference count and the
    ``atexit`` handlers still run. bench/quit_bench.py measures it.
    """
    status = main(argv)
    gc.freeze()
    return status


def launch(args: argparse.Namespace) -> int:
    """Open the target, then run the console until the operator quits."""
    from textual.theme import BUILTIN_THEMES

    from cairnq_tui.app import ConsoleApp, Settings

    # Checked before the target is opened (and a new database created).
    if args.theme and args.theme not in BUILTIN_THEMES:
        themes = ", ".join(sorted(BUILTIN_THEMES))
        return refused(f"unknown theme {args.theme!r}; choose one of {themes}")
    try:
        target = args.resolved or parse_target(args.target, args.schema)
        if target.is_postgres and args.synchronous is not None:
            raise TargetError("--synchronous applies to SQLite targets only")
        synchronous: Literal["full", "normal"] = args.synchronous or "full"
        store = make_store(target, read_only=args.read_only, synchronous=synchronous)
        host = None
        if args.workers:
            # Loaded before the target is opened: a worker that cannot load must
            # not leave a new database behind.
            host = WorkerHost(
                args.workers,
                make_store=partial(make_store, target, read_only=False, synchronous=synchronous),
                target_text=target.raw,
                reference=store,
            )
            host.check()
        create = args.create or bool(args.workers)
        notice = asyncio.run(check_target(target, read_only=args.read_only, create=create))
    except (TargetError, HostError) as exc:
        return refused(str(exc))
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # never a traceback for the operator; say what broke
        print(cannot_open(args.target, exc), file=sys.stderr)
        return EXIT_BAD_TARGET
    settings = Settings(
        target=target,
        read_only=args.read_only,
        queues=tuple(args.queues or ()),
        refresh_s=args.refresh,
        theme=args.theme,
        notice=notice,
        max_depth=dict(args.max_depth),
        history=not args.no_history,
        **settings_fields(args),
    )
    app = ConsoleApp(store, settings, host=host)
    if not start_hosting(host):
        if notice is not None and not target.is_postgres:
            _remove_sqlite_file(target.raw)  # created above for workers that never started
        return EXIT_BAD_TARGET
    return run_hosting(app, host, started=True)


def _remove_sqlite_file(path: str) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        with contextlib.suppress(OSError):
            os.remove(path + suffix)


def demo(args: argparse.Namespace) -> int:
    """The console on a demo database, with the demo worker hosted and traffic running."""
    from cairnq_tui.app import ConsoleApp, Settings
    from cairnq_tui.demo import DemoTraffic

    folder = None if args.db else Path(tempfile.mkdtemp(prefix="cairnq-demo-"))
    path = str(folder / "demo.db") if folder is not None else args.db
    try:
        target = parse_target(path)
        # The demo hosts a worker, and a hosted worker creates the cairnq tables
        # in an empty Postgres database, as ``launch --worker`` does.
        created = asyncio.run(check_target(target, read_only=False, create=True))
        store = make_store(target, read_only=False)
        new_store = partial(make_store, target, read_only=False)
        host = WorkerHost(
            ["cairnq_tui.demo:make_worker"],
            make_store=new_store,
            target_text=target.raw,
            reference=store,
        )
        traffic = DemoTraffic(new_store, rate=args.rate, seed=args.seed)
        kept = "kept" if folder is None else "deleted on quit"
        shown = target.display if target.is_postgres else path  # never a password
        settings = Settings(
            target=target,
            notice=(f"{created}. " if created and target.is_postgres else "")
            + f"Demo: {args.rate:g} tasks/s into {shown} ({kept}). "
            "Keys 1-9 switch views; ? lists every key.",
            history=folder is None,  # a throwaway database keeps no history file
        )
        app = ConsoleApp(store, settings, host=host)
        traffic.start()
        try:
            return run_hosting(app, host)
        finally:
            traffic.stop()
    except TargetError as exc:
        return refused(str(exc))
    finally:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(run())
