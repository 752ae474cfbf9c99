"""The store both dialects share a suite through, and a window on its database.

``store`` (connected) and ``new_store`` (not yet) are parametrised over SQLite
and Postgres (the Postgres param carries the ``postgres`` mark, so a missing
server is a visible skip, and a failure under ``CAIRNQ_REQUIRE_PG=1``).
``database`` reads and changes the same tables on a connection of its own:
what another process would see.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from store_support import DIALECTS, Database

from engine import PostgresStore, SQLiteStore, TaskStore


@pytest.fixture(params=DIALECTS)
def new_store(request: pytest.FixtureRequest, tmp_path: Path) -> TaskStore:
    """A store on a fresh SQLite file or a throwaway Postgres schema, not yet connected."""
    if request.param == "sqlite":
        return SQLiteStore(tmp_path / "tasks.db")
    dsn = request.getfixturevalue("pg_dsn")
    return PostgresStore(dsn, schema=request.getfixturevalue("pg_schema"), max_size=4)


@pytest.fixture
async def store(new_store: TaskStore) -> AsyncIterator[TaskStore]:
    """``new_store``, connected (and closed after the test): the store every suite shares."""
    await new_store.connect()
    yield new_store
    await new_store.close()


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
