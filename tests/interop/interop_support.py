"""Helpers for the interop tests: the shared database and direct reads of it.

``Backend`` names one database (a SQLite file, or a Postgres DSN and schema) and
opens an engine store or a cairnq store on it. ``rows`` reads it outside both
stores, to observe what has no public window (ledger, catalogs).
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Awaitable, Callable
from contextlib import closing
from dataclasses import dataclass
from typing import Any

import pytest

from engine.store._base import TaskStore
from engine.store.postgres import PostgresStore
from engine.store.sqlite import SQLiteStore

# The peer extra; without it the interop modules are skipped, not broken.
cairnq = pytest.importorskip("cairnq")


@dataclass
class Backend:
    """One shared database and how each side opens it."""

    dialect: str
    location: str  # SQLite file path, or the Postgres DSN
    schema: str | None = None

    def engine(self) -> TaskStore:
        if self.dialect == "sqlite":
            return SQLiteStore(self.location)
        return PostgresStore(self.location, schema=self.schema, max_size=3)

    def peer(self) -> Any:
        if self.dialect == "sqlite":
            return cairnq.SQLiteStore(self.location)
        return cairnq.PostgresStore(as_url(self.location), schema=self.schema, max_size=3)

    def side(self, name: str) -> Any:
        """A new, unconnected store of the named side ("engine" or "peer")."""
        return self.engine() if name == "engine" else self.peer()


def as_url(dsn: str) -> str:
    """A DSN in the URL form asyncpg (cairnq's driver) insists on."""
    if dsn.startswith(("postgresql://", "postgres://")):
        return dsn
    from urllib.parse import quote

    from psycopg.conninfo import conninfo_to_dict

    params = conninfo_to_dict(dsn)
    user = quote(str(params.get("user", "")))
    password = params.get("password")
    auth = f"{user}:{quote(str(password))}@" if password else (f"{user}@" if user else "")
    host = params.get("host", "localhost")
    port = params.get("port", 5432)
    return f"postgresql://{auth}{host}:{port}/{quote(str(params.get('dbname', '')))}"


@dataclass
class Pair:
    """Both sides connected to one database."""

    engine: TaskStore
    peer: Any

    def side(self, name: str) -> Any:
        return self.engine if name == "engine" else self.peer


def rows(backend: Backend, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Run one read on the shared database outside both stores (``?`` placeholders)."""
    if backend.dialect == "sqlite":
        with closing(sqlite3.connect(backend.location)) as db:
            return [tuple(r) for r in db.execute(sql, params)]
    import psycopg

    options = f"-c search_path={backend.schema}" if backend.schema else ""
    with psycopg.connect(backend.location, options=options) as conn:
        return [tuple(r) for r in conn.execute(sql.replace("?", "%s"), params)]


def ledger(backend: Backend) -> list[tuple[Any, ...]]:
    return rows(backend, "select name, applied_at_ms from cairnq_migrations order by name")


def meta(backend: Backend) -> list[tuple[Any, ...]]:
    return rows(backend, "select key, value from cairnq_meta order by key")


async def eventually(check: Callable[[], Awaitable[bool]], *, within_s: float = 5.0) -> None:
    """Await ``check`` until it holds; fail after ``within_s`` seconds."""
    deadline = time.monotonic() + within_s
    while not await check():
        if time.monotonic() > deadline:
            pytest.fail(f"condition not met within {within_s} s")
        await asyncio.sleep(0.02)
