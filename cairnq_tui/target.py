"""Opening what ``cairnq-tui launch TARGET`` points at, refusing anything doubtful.

A target is a SQLite path or a ``postgres://``/``postgresql://`` DSN. Before the
console opens a store it checks that the target is, or is about to become, a
cairnq database: a SQLite file holding other tables is never migrated, and a
Postgres target is first opened read-only so a mistyped schema is not created.
Every failure becomes a ``TargetError`` whose message fits on one screen and
never shows a password.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Literal

from engine import (
    CairnQError,
    PostgresStore,
    ProtocolVersionMismatch,
    SchemaMismatch,
    SQLiteStore,
    StoreUnavailable,
    TaskStore,
)
from engine.inspection import describe_sqlite_file
from engine.store import redact_dsn

DEFAULT_TARGET = "tasks.db"
_PG_SCHEMES = ("postgres://", "postgresql://")


class TargetError(Exception):
    """The target cannot be used; ``str()`` is the message for the operator."""


@dataclass(frozen=True, slots=True)
class Target:
    """A parsed TARGET: where, which dialect, and what to show for it."""

    raw: str
    dialect: str
    display: str
    schema: str | None = None

    @property
    def is_postgres(self) -> bool:
        return self.dialect == "postgres"


def cannot_open(raw: str | None, exc: BaseException) -> str:
    """The one line for an unexpected failure opening TARGET ``raw`` (password hidden)."""
    return (
        f"cairnq-tui: cannot open {redact_dsn(str(raw or DEFAULT_TARGET))}: "
        f"{type(exc).__name__}: {redact_dsn(str(exc))}"
    )


def parse_target(raw: str | None, schema: str | None = None) -> Target:
    """Classify TARGET (None = ``./tasks.db``).

    Raises:
        TargetError: ``--schema`` given for a SQLite file.
    """
    value = raw if raw else DEFAULT_TARGET
    if value.startswith(_PG_SCHEMES) or ("=" in value and "dbname" in value):
        return Target(value, "postgres", redact_dsn(value), schema)
    if schema is not None:
        raise TargetError(f"--schema applies to Postgres targets only, not to {value}")
    return Target(value, "sqlite", value)


def make_store(
    target: Target, *, read_only: bool, synchronous: Literal["full", "normal"] = "full"
) -> TaskStore:
    """An unconnected store for the target (after ``check_target`` accepted it).

    ``synchronous`` is the SQLite durability (``launch --synchronous``).

    Raises:
        TargetError: the DSN or schema name is malformed.
    """
    if not target.is_postgres:
        return SQLiteStore(
            target.raw, read_only=read_only, migrate=not read_only, synchronous=synchronous
        )
    try:
        return PostgresStore(
            target.raw, schema=target.schema, read_only=read_only, migrate=False, max_size=4
        )
    except ValueError as exc:
        raise TargetError(redact_dsn(str(exc))) from None


async def check_target(target: Target, *, read_only: bool) -> str | None:
    """Open the target once to prove it is a cairnq database; a notice, if any.

    A new SQLite file is created (and migrated) here, hence the notice. Postgres
    is probed read-only: no schema is created and nothing is migrated.

    Raises:
        TargetError: the target does not answer or is not a cairnq database.
    """
    notice = None if target.is_postgres else _check_sqlite_file(target.raw, read_only)
    store = make_store(target, read_only=read_only or target.is_postgres)
    await _connect(store, target)
    await store.close()
    return notice


def _check_sqlite_file(path: str, read_only: bool) -> str | None:
    """Refuse a file that is not (and should not become) a cairnq database; a notice."""
    notice = None
    found = describe_sqlite_file(path)
    if found.kind == "not-sqlite":
        raise TargetError(f"{path} is not a SQLite database ({found.detail}).")
    if found.kind == "foreign":
        shown = ", ".join(found.tables[:8]) + (" …" if len(found.tables) > 8 else "")
        raise TargetError(
            f"{path} is a SQLite database but not a cairnq one (it holds: {shown}).\n"
            "The console will not add cairnq tables to it; point it at a cairnq database."
        )
    if found.kind in ("missing", "empty"):
        if read_only:
            raise TargetError(f"{path} does not exist yet; --read-only cannot create it.")
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            # A mistyped path must not become a tree of new folders.
            raise TargetError(f"cannot create {path}: the folder {folder} does not exist.")
        notice = f"Created a new cairnq database at {os.path.abspath(path)}"
    return notice


async def _connect(store: TaskStore, target: Target) -> None:
    where = target.display + (f" (schema {target.schema})" if target.schema else "")
    try:
        await store.connect()
    except ProtocolVersionMismatch as exc:
        await _close_quietly(store)
        if re.search(r"protocol 0\b", str(exc)):
            raise TargetError(
                f"{where} has no cairnq tables.\n"
                "Start a cairnq worker or client against it first (they create the schema)."
            ) from None
        shown = redact_dsn(str(exc))
        raise TargetError(f"{where} speaks another cairnq protocol: {shown}") from None
    except SchemaMismatch as exc:
        await _close_quietly(store)
        raise TargetError(_wrong_schema(target, str(exc))) from None
    except StoreUnavailable as exc:
        await _close_quietly(store)
        raise TargetError(f"cannot open {where}: {redact_dsn(str(exc))}") from None
    except (CairnQError, OSError) as exc:
        await _close_quietly(store)
        raise TargetError(f"cannot open {where}: {redact_dsn(str(exc))}") from None


def _wrong_schema(target: Target, detail: str) -> str:
    """The target once, the schema the console looked in, and where the tables are."""
    if target.schema is not None:
        return (
            f"wrong schema: looked in schema {target.schema!r} of {target.display}, "
            "which does not exist or is not on the search path; check --schema."
        )
    looked = re.search(r"current schema is '([^']*)'", detail)
    found = re.search(r"in schema\(s\) (.+?) but", detail)
    where = f"schema {looked.group(1)!r}" if looked else "the session's current schema"
    tables = f"; its cairnq tables are in {found.group(1)}" if found else ""
    hint = f" (pass --schema {found.group(1).split(', ')[0]})" if found else ""
    return f"wrong schema: looked in {where} of {target.display}{tables}{hint}."


async def _close_quietly(store: TaskStore) -> None:
    try:
        await store.close()
    except Exception:  # closing a store that never opened may fail; nothing to report
        return
