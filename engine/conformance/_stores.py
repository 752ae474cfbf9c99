"""Fresh, empty stores for scenarios: one per scenario, as the scenario format requires.

SQLite gets a new file per scenario. Postgres gets a throwaway schema per
scenario (created by the store, dropped afterwards), or, when the caller names a
schema, that schema with its two data tables truncated before each scenario.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

from engine.store._base import TaskStore

#: Called once per scenario: an async context manager yielding a connected, empty
#: store and closing (and, where it owns it, removing) it on exit.
StoreFactory = Callable[[], AbstractAsyncContextManager[TaskStore]]


def sqlite_stores(directory: Path) -> StoreFactory:
    """A new SQLite file in ``directory`` for each scenario (the caller owns the folder)."""
    from engine.store.sqlite import SQLiteStore

    @asynccontextmanager
    async def fresh() -> AsyncIterator[TaskStore]:
        store = SQLiteStore(str(directory / f"scenario-{uuid.uuid4().hex}.db"))
        await store.connect()
        try:
            yield store
        finally:
            await store.close()

    return fresh


def postgres_stores(dsn: str, schema: str | None = None) -> StoreFactory:
    """Postgres stores: a throwaway schema each, or ``schema`` truncated each time."""
    import psycopg
    from psycopg import sql

    from engine.store.postgres import PostgresStore

    async def admin(statement: sql.Composed) -> None:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            await conn.execute(statement)

    @asynccontextmanager
    async def fresh() -> AsyncIterator[TaskStore]:
        name = schema or f"cq_conformance_{uuid.uuid4().hex[:12]}"
        store = PostgresStore(dsn, schema=name, max_size=2)
        try:
            await store.connect()
            if schema is not None:
                # The named schema persists between scenarios: empty it. The key
                # table goes with the task table it references.
                await admin(
                    sql.SQL("truncate {}, {}").format(
                        sql.Identifier(name, "cairnq_task_keys"),
                        sql.Identifier(name, "cairnq_tasks"),
                    )
                )
            yield store
        finally:
            await store.close()
            if schema is None:
                await admin(
                    sql.SQL("drop schema if exists {} cascade").format(sql.Identifier(name))
                )

    return fresh
