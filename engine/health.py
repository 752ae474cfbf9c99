"""Facts a health check (``cairnq-tui doctor``) judges, read without writing anything.

* ``schema_health``: the migration ledger against this engine's migration list
  (``engine._sql.migrations``) and the catalog against the protocol's tables and
  indexes (``engine.store._schema_check``, the list the stores check at open),
  indexes judged even when the ledger is incomplete.
* ``sqlite_file_health``: journal mode, sizes of the file and its WAL, the
  ``synchronous`` a new connection gets, free disk.
* ``server_health``: a Postgres server's clock against this host's, its
  durability settings and the database's size.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from engine._clock import now_ms
from engine._sql import migrations
from engine.store import PostgresStore, TaskStore
from engine.store import _schema_check as schema_check


@dataclass(frozen=True, slots=True)
class SchemaHealth:
    """The ledger and the catalog against the protocol's schema."""

    dialect: str
    known: tuple[str, ...]
    ledger: frozenset[str] | None
    problems: tuple[str, ...]

    @property
    def missing(self) -> tuple[str, ...]:
        """Migrations of this engine's list the ledger lacks (all of them without one)."""
        have = self.ledger or frozenset()
        return tuple(name for name in self.known if name not in have)

    @property
    def unknown(self) -> tuple[str, ...]:
        """Ledger rows this engine does not know (a newer SDK's migrations)."""
        return tuple(sorted((self.ledger or frozenset()) - set(self.known)))


async def schema_health(store: TaskStore, *, sqlite_path: str | None = None) -> SchemaHealth:
    """Read the catalog of ``store``'s database (``sqlite_path`` for a SQLite file).

    ``store`` need not be connected (a store refuses to connect to a database whose
    schema differs, and that is when this report matters most): Postgres is read
    on one session of its own, with the store's settings (schema, read-only).

    Raises:
        ValueError: a SQLite store without ``sqlite_path``.
    """
    dialect = store.dialect
    if isinstance(store, PostgresStore):
        conn = await store._open_session()
        try:
            catalog = await schema_check.read_postgres(conn)
        finally:
            await conn.close()
    else:
        if sqlite_path is None:
            raise ValueError("sqlite_path is required for a SQLite store")
        lite = _read_only(sqlite_path)
        try:
            lite.execute("begin")
            catalog = schema_check.read_sqlite(lite)
            lite.execute("rollback")
        finally:
            lite.close()
    known = tuple(name for name, _ in migrations(dialect))
    problems = schema_check.differences(catalog, dialect, complete=True)
    ledger = None if catalog.ledger is None else frozenset(catalog.ledger)
    return SchemaHealth(dialect, known, ledger, tuple(problems))


def _read_only(path: str) -> sqlite3.Connection:
    return sqlite3.connect(Path(path).resolve().as_uri() + "?mode=ro", uri=True)


@dataclass(frozen=True, slots=True)
class SQLiteFileHealth:
    """A SQLite database file as a health check sees it."""

    journal_mode: str
    synchronous: int
    db_bytes: int
    wal_bytes: int
    free_pages: int
    page_size: int
    disk_free_bytes: int
    disk_total_bytes: int


def sqlite_file_health(path: str) -> SQLiteFileHealth:
    """Read the pragmas and sizes of the file at ``path`` (read-only)."""
    conn = _read_only(path)
    try:
        journal = str(conn.execute("pragma journal_mode").fetchone()[0])
        synchronous = int(conn.execute("pragma synchronous").fetchone()[0])
        free_pages = int(conn.execute("pragma freelist_count").fetchone()[0])
        page_size = int(conn.execute("pragma page_size").fetchone()[0])
    finally:
        conn.close()
    wal = path + "-wal"
    disk = shutil.disk_usage(os.path.dirname(os.path.abspath(path)))
    return SQLiteFileHealth(
        journal_mode=journal.lower(),
        synchronous=synchronous,
        db_bytes=os.path.getsize(path),
        wal_bytes=os.path.getsize(wal) if os.path.exists(wal) else 0,
        free_pages=free_pages,
        page_size=page_size,
        disk_free_bytes=disk.free,
        disk_total_bytes=disk.total,
    )


@dataclass(frozen=True, slots=True)
class ServerHealth:
    """A Postgres server's clock and settings, read in one round trip."""

    server_ms: int
    sent_ms: int
    received_ms: int
    synchronous_commit: str
    fsync: str
    db_bytes: int

    @property
    def skew_ms(self) -> int:
        """Server clock minus this host's, at the middle of the round trip."""
        return self.server_ms - (self.sent_ms + self.received_ms) // 2

    @property
    def round_trip_ms(self) -> int:
        return self.received_ms - self.sent_ms


async def server_health(store: TaskStore) -> ServerHealth | None:
    """The server's clock and settings; None for a SQLite store."""
    if store.dialect != "postgres":
        return None
    await store.read_statement("inspect_server", {})  # a warm connection: time one trip only
    sent = now_ms()
    row = (await store.read_statement("inspect_server", {}))[0]
    received = now_ms()
    return ServerHealth(
        server_ms=int(row["now_ms"]),
        sent_ms=sent,
        received_ms=received,
        synchronous_commit=str(row["synchronous_commit"]),
        fsync=str(row["fsync"]),
        db_bytes=int(row["db_bytes"]),
    )


__all__ = [
    "SQLiteFileHealth",
    "SchemaHealth",
    "ServerHealth",
    "schema_health",
    "server_health",
    "sqlite_file_health",
]
