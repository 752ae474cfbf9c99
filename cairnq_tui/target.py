"""Opening what ``cairnq-tui launch TARGET`` points at, refusing anything doubtful.

A target is a SQLite path or a ``postgres://``/``postgresql://`` DSN. Before the
console opens a store it checks that the target is, or is about to become, a
cairnq database: a SQLite file holding other tables is never migrated, and a
Postgres target is first opened read-only so a mistyped schema is not created.
Every failure becomes a ``TargetError`` whose message fits on one screen and
never shows a password.

(Names for targets, from the config file: ``named_targets``; what the console
runs with once a target is open: ``settings``.)
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from engine import (
    CairnQError,
    PostgresStore,
    ProtocolVersionMismatch,
    SchemaMismatch,
    SQLiteStore,
    TaskStore,
)
from engine.inspection import describe_sqlite_file
from engine.store import redact_dsn

DEFAULT_TARGET = "tasks.db"
_PG_SCHEMES = ("postgres://", "postgresql://")
#: A libpq ``keyword=value`` connection string starts with a keyword and ``=``
#: (``host=db user=app``): never a file name (write ``./host=x`` for such a file).
_KEYWORD_DSN = re.compile(r"\s*[A-Za-z_][A-Za-z0-9_]*\s*=")
#: ``scheme://``: a URL; only Postgres's are targets (a ``mysql://`` or
#: ``sqlite:///`` one would otherwise be taken for a file path).
_URL = re.compile(r"\s*[A-Za-z][A-Za-z0-9+.-]*://")


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
    where = redact_dsn(str(raw or DEFAULT_TARGET))
    detail = redact_dsn(str(exc), source=raw)
    if where in detail:  # the error names the target already
        return f"cairnq-tui: {type(exc).__name__}: {detail}"
    return f"cairnq-tui: cannot open {where}: {type(exc).__name__}: {detail}"


def is_dsn(value: str) -> bool:
    """True for a Postgres DSN: a ``postgres(ql)://`` URI or a libpq ``key=value`` string."""
    return value.startswith(_PG_SCHEMES) or _KEYWORD_DSN.match(value) is not None


def parse_target(raw: str | None, schema: str | None = None) -> Target:
    """Classify TARGET (None = ``./tasks.db``).

    Any libpq ``keyword=value`` string or ``postgres(ql)://`` URI is Postgres,
    whether or not it names a database.

    Raises:
        TargetError: an empty TARGET, a URL of another scheme (``mysql://``,
            ``sqlite:///``), or ``--schema`` given for a SQLite file.
    """
    if raw is not None and not raw.strip():
        raise TargetError("TARGET is empty: give a SQLite file path or a Postgres DSN")
    value = raw if raw is not None else DEFAULT_TARGET
    if is_dsn(value):
        return Target(value, "postgres", redact_dsn(value), schema)
    if _URL.match(value):
        raise TargetError(
            f"{redact_dsn(value)} is a URL the console cannot open: give a SQLite file "
            "path or a postgresql:// DSN"
        )
    if schema is not None:
        raise TargetError(f"--schema applies to Postgres targets only, not to {value}")
    return Target(value, "sqlite", value)


#: A console read waits this long for a pooled Postgres connection, then opens its
#: own: after an outage the pool reconnects on a growing back-off, the console
#: should not wait for its next attempt.
READ_OWN_CONNECTION_AFTER_S = 0.5


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
            target.raw,
            schema=target.schema,
            read_only=read_only,
            migrate=False,
            max_size=4,
            # After an outage: live as soon as the server answers (issue 20.8).
            read_own_connection_after_s=READ_OWN_CONNECTION_AFTER_S,
        )
    except ValueError as exc:
        raise TargetError(redact_dsn(str(exc), source=target.raw)) from None


class _NoTables(Exception):
    """The Postgres target answers but holds no cairnq tables (or no such schema).

    ``str()`` is where; ``refusal`` the message when nothing may be created.
    """

    def __init__(self, where: str, refusal: str) -> None:
        super().__init__(where)
        self.refusal = refusal


async def check_target(target: Target, *, read_only: bool, create: bool = False) -> str | None:
    """Open the target once to prove it is a cairnq database; a notice, if any.

    A new SQLite file is created (and migrated) here, hence the notice. Postgres
    is probed read-only first; only with ``create`` (``--create``, or a hosted
    ``--worker``) does an empty database (or a missing ``--schema``) get the
    cairnq tables, with a notice saying so.

    Raises:
        TargetError: the target does not answer or is not a cairnq database.
    """
    notice = None if target.is_postgres else _check_sqlite_file(target.raw, read_only)
    store = make_store(target, read_only=read_only or target.is_postgres)
    try:
        await _connect(store, target)
    except _NoTables as empty:
        if not create or read_only:
            raise TargetError(empty.refusal) from None
        creator = PostgresStore(target.raw, schema=target.schema, migrate=True, max_size=1)
        await _connect(creator, target)
        await creator.close()
        return f"Created the cairnq tables in {empty}"
    await store.close()
    return notice


def _check_sqlite_file(path: str, read_only: bool) -> str | None:
    """Refuse a file that is not (and should not become) a cairnq database; a notice."""
    notice = None
    if not read_only:
        _check_writable(path)  # before looking: a read-only look still makes -wal/-shm
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


def _check_writable(path: str) -> None:
    """Refuse an existing database the console could not write, before anything opens it."""
    file = Path(path)
    if not file.is_file():
        return
    if not os.access(file, os.W_OK) or not file.stat().st_mode & 0o222:
        raise TargetError(f"{path} is read-only; open it with --read-only to inspect it.")
    if not os.access(file.resolve().parent, os.W_OK | os.X_OK):
        raise TargetError(
            f"cannot write in the folder of {path}; open it with --read-only to inspect it."
        )


async def _connect(store: TaskStore, target: Target) -> None:
    where = target.display + (f" (schema {target.schema})" if target.schema else "")
    try:
        await store.connect()
    except ProtocolVersionMismatch as exc:
        await _close_quietly(store)
        if re.search(r"protocol 0\b", str(exc)):
            raise _NoTables(
                where,
                f"{where} has no cairnq tables: start a cairnq worker or client against it "
                "first, or pass --create (or host a --worker) to create them here",
            ) from None
        shown = redact_dsn(str(exc))
        raise TargetError(f"{where} speaks another cairnq protocol: {shown}") from None
    except SchemaMismatch as exc:
        await _close_quietly(store)
        refusal = _wrong_schema(target, str(exc))
        if target.schema is not None and "current_schema() = None" in str(exc):
            raise _NoTables(where, refusal) from None  # the schema does not exist (yet)
        raise TargetError(refusal) from None
    except (CairnQError, OSError) as exc:
        await _close_quietly(store)
        detail = redact_dsn(str(exc), source=target.raw)
        if target.display in detail:  # the engine's message names the target already
            raise TargetError(detail) from None
        raise TargetError(f"cannot open {where}: {detail}") from None


def _wrong_schema(target: Target, detail: str) -> str:
    """The target once, the schema the console looked in, and where the tables are."""
    if target.schema is not None:
        return (
            f"wrong schema: looked in schema {target.schema!r} of {target.display}, "
            "which does not exist or is not on the search path; check --schema "
            "(--create creates it)."
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
