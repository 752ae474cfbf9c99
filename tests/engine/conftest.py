"""The store both dialects share a suite through, and a window on its database.

``store`` is parametrised over SQLite and Postgres (the Postgres param carries
the ``postgres`` mark, so a missing server is a visible skip, and a failure
under ``CAIRNQ_REQUIRE_PG=1``). ``database`` reads and changes the same tables
on a connection of its own: what another process would see.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from store_support import DIALECTS, Database

from engine import PostgresStore, SQLiteStore, TaskStore


@pytest.fixture(params=DIALECTS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[TaskStore]:
    """A connected store on a fresh SQLite file or a throwaway Postgres schema."""
    s: TaskStore
    if request.param == "sqlite":
        s = SQLiteStore(tmp_path / "tasks.db")
    else:
        dsn = request.getfixturevalue("pg_dsn")
        s = PostgresStore(dsn, schema=request.getfixturevalue("pg_schema"), max_size=4)
    await s.connect()
    yield s
    await s.close()


@pytest.fixture
def database(store: TaskStore, request: pytest.FixtureRequest) -> Database:
    if isinstance(store, SQLiteStore):
        return Database("sqlite", sqlite_path=Path(store.target))
    assert isinstance(store, PostgresStore)
    return Database(
        "postgres",
        dsn=request.getfixturevalue("pg_dsn"),
        schema=request.getfixturevalue("pg_schema"),
    )
