"""What every operator subcommand shares: opening the target, guarding writes, output.

A subcommand opens the same targets as ``launch`` (a SQLite path, a DSN, or a
NAME from the config file) through the same code (``config.resolve``,
``target.check_target``, ``target.make_store``), and reads and writes through the
engine's ``Inspector`` and ``CairnQ``, as the console does. It never creates a
database: a missing SQLite file is bad input.

Exit statuses: 0 success (no match included), 1 a failed check or a refused
write, 2 bad input (one line on stderr, nothing written).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from cairnq_tui.formatting import clean
from cairnq_tui.named_targets import ConfigError, NamedTarget, resolve
from cairnq_tui.target import Target, TargetError, check_target, make_store, parse_target
from engine import CairnQ, TaskStore
from engine.inspection import Inspector, describe_sqlite_file, parse_duration

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2


class BadInput(Exception):
    """Bad arguments or a target that cannot be opened: exit 2, nothing written."""


class Refused(Exception):
    """A write refused (read-only, danger gate, no confirmation) or a failed check: exit 1."""


@dataclass
class Opened:
    """An open target: its store, the console's client and inspector over it."""

    target: Target
    named: NamedTarget | None
    read_only: bool
    store: TaskStore
    client: CairnQ
    inspector: Inspector


def add_target_arguments(parser: argparse.ArgumentParser) -> None:
    """TARGET, ``--config``, ``--schema`` and ``--read-only``, as ``launch`` has them."""
    parser.add_argument(
        "target",
        metavar="TARGET",
        help="a target NAME from the config file, a SQLite path or a postgres:// DSN",
    )
    parser.add_argument("--config", metavar="FILE", help="the config file naming targets")
    parser.add_argument("--schema", help="Postgres schema holding the cairnq tables")
    parser.add_argument(
        "--read-only", action="store_true", help="open the database read-only; refuse writes"
    )


def add_write_arguments(parser: argparse.ArgumentParser) -> None:
    """``--yes``, ``--dry-run`` and ``--confirm-target`` for a command that writes."""
    parser.add_argument("--yes", "-y", action="store_true", help="do not ask before writing")
    parser.add_argument(
        "--dry-run", action="store_true", help="print what would change; write nothing"
    )
    parser.add_argument(
        "--confirm-target",
        metavar="NAME",
        help="the target's name, required to write to a target marked danger = true",
    )


def resolve_target(
    args: argparse.Namespace, *, check_file: bool = True
) -> tuple[Target, NamedTarget | None, bool]:
    """The target ``args`` name, its config entry, and whether it is read-only.

    ``check_file``: also refuse a missing SQLite file (which reads the path).

    Raises:
        BadInput: a bad config, an unknown name, a bad DSN or a missing SQLite file.
    """
    try:
        named = resolve(args.target, args.config)
        if named is not None:
            target = named.open_target(args.schema)
        else:
            target = parse_target(args.target, args.schema)
    except (ConfigError, TargetError) as exc:
        raise BadInput(str(exc)) from None
    if check_file:
        require_database(target)
    read_only = bool(args.read_only or (named is not None and named.read_only))
    return target, named, read_only


def require_database(target: Target) -> None:
    """Refuse a SQLite path that holds no database: the command line never creates one.

    Raises:
        BadInput: the file is missing or empty.
    """
    if not target.is_postgres:
        found = describe_sqlite_file(target.raw)
        if found.kind in ("missing", "empty"):
            raise BadInput(
                f"no cairnq database at {target.raw} (the command line never creates one)"
            )


def guard_write(args: argparse.Namespace, named: NamedTarget | None, read_only: bool) -> None:
    """Refuse a write to a read-only or (unconfirmed) danger target, before opening it.

    Raises:
        Refused: the target is read-only, or a danger target's name was not given.
    """
    if read_only:
        why = (
            "--read-only"
            if args.read_only
            else f"target {named.name if named else ''} is read_only"
        )
        raise Refused(f"refused: this command writes and {why.strip()}; nothing written")
    if named is not None and named.danger:
        given = getattr(args, "confirm_target", None)
        if given != named.name:
            raise Refused(
                f"refused: {named.name} is marked danger; pass --confirm-target {named.name} "
                "to write to it; nothing written"
            )


@asynccontextmanager
async def opened(args: argparse.Namespace, *, write: bool = False) -> AsyncIterator[Opened]:
    """Open the target (read-only unless ``write``); close it on the way out.

    Raises:
        BadInput: the target does not answer or is not a cairnq database.
        Refused: ``write`` on a target that refuses writes.
    """
    target, named, read_only = resolve_target(args, check_file=False)
    if write:
        guard_write(args, named, read_only)  # before the file is even looked at
    require_database(target)
    try:
        await check_target(target, read_only=True)
        store = make_store(target, read_only=not write)
        await store.connect()
    except TargetError as exc:
        raise BadInput(str(exc)) from None
    except Exception as exc:  # never a traceback; the message hides any password
        from cairnq_tui.target import cannot_open

        raise BadInput(cannot_open(args.target, exc).removeprefix("cairnq-tui: ")) from None
    try:
        yield Opened(target, named, read_only, store, CairnQ(store), Inspector(store))
    finally:
        await store.close()


# -- values and output -----------------------------------------------------------------


def iso(ms: int | None) -> str | None:
    """Epoch milliseconds as an ISO 8601 UTC string (``2026-12-04T13:53:12.000Z``)."""
    if ms is None:
        return None
    moment = datetime.fromtimestamp(ms / 1000, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def duration_arg(text: str) -> int:
    """An argparse ``type``: ``30s``, ``15m``, ``24h``, ``7d`` -> ms."""
    try:
        return parse_duration(text, zero=True)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def positive_int(text: str) -> int:
    """An argparse ``type``: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def emit_json(value: Any) -> None:
    """One JSON object on its own line of stdout."""
    print(json.dumps(value, ensure_ascii=False, default=str))


def table(headers: list[str], rows: list[list[str]]) -> None:
    """A plain aligned table on stdout (every cell escaped like the console's)."""
    cells = [[clean(c) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    for row in [headers, *cells]:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


class ProgressLine:
    """Progress of a long write on stderr, redrawn in place, only when it is a terminal."""

    def __init__(self, verb: str) -> None:
        self.verb = verb
        self.shown = sys.stderr.isatty()
        self._last = 0.0

    def __call__(self, done: int, total: int | None) -> None:
        if not self.shown:
            return
        now = time.monotonic()
        if now - self._last < 0.1 and done != total:
            return
        self._last = now
        of = f" of {total:,}" if total else ""
        sys.stderr.write(f"\r{self.verb} {done:,}{of}…")
        sys.stderr.flush()

    def close(self) -> None:
        if self.shown and self._last:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()


def confirm(question: str) -> bool:
    """Ask on stderr, read one answer from stdin; True only for y / yes."""
    sys.stderr.write(f"{question} [y/N] ")
    sys.stderr.flush()
    answer = sys.stdin.readline()
    return answer.strip().lower() in ("y", "yes")
