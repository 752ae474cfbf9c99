"""Fixtures shared by every test: fresh SQLite files and throwaway Postgres schemas.

Postgres tests read the server from ``CAIRNQ_TEST_PG_DSN`` and skip cleanly when it
is unset or no server answers at it; with ``CAIRNQ_REQUIRE_PG=1`` (what .ci/run
sets) such a skip is turned into a failure, so CI can never pass with Postgres
silently untested. The same goes for the browser test (marker ``browser``) under
``CAIRNQ_REQUIRE_BROWSER=1``.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from pg_support import dsn_for_database, pg_dsn_or_skip


def _admin_execute(dsn: str, sql: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql)


@pytest.fixture
def pg_dsn() -> str:
    """The test server's DSN (the shared ``test`` database)."""
    return pg_dsn_or_skip()


@pytest.fixture
def pg_schema(pg_dsn: str) -> Iterator[str]:
    """A fresh, empty schema name in the test database, dropped afterwards.

    The schema itself is not created: stores given ``schema=`` create it.
    """
    name = f"t_{uuid.uuid4().hex[:12]}"
    yield name
    _admin_execute(pg_dsn, f'drop schema if exists "{name}" cascade')


@pytest.fixture
async def pg_store(pg_dsn: str, pg_schema: str) -> AsyncIterator[Any]:
    """A connected ``PostgresStore`` on a fresh schema (a small pool), closed after."""
    from engine import PostgresStore

    s = PostgresStore(pg_dsn, schema=pg_schema, max_size=4)
    await s.connect()
    yield s
    await s.close()


@pytest.fixture
def pg_database(pg_dsn: str) -> Iterator[str]:
    """A DSN for a brand-new database (for tests about the public schema), dropped after."""
    name = f"cq_{uuid.uuid4().hex[:12]}"
    _admin_execute(pg_dsn, f'create database "{name}"')
    yield dsn_for_database(pg_dsn, name)
    _admin_execute(pg_dsn, f'drop database if exists "{name}" with (force)')


@pytest.fixture
def sqlite_path(tmp_path: Path) -> Path:
    """A path for a new SQLite database file (not created yet)."""
    return tmp_path / "tasks.db"


@pytest.fixture
async def sqlite_store(sqlite_path: Path) -> AsyncIterator[Any]:
    """A connected ``SQLiteStore`` on a new file (default durability), closed after."""
    from engine import SQLiteStore

    s = SQLiteStore(sqlite_path)
    await s.connect()
    yield s
    await s.close()


def needs_postgres(item: pytest.Item) -> bool:
    """Whether ``item`` runs on Postgres: it uses the server fixture, or it is the
    ``postgres`` case of a parametrisation (whose fixture may open the server itself)."""
    if "pg_dsn" in getattr(item, "fixturenames", ()):
        return True
    callspec = getattr(item, "callspec", None)
    return callspec is not None and "postgres" in re.split(r"[-\[\]]", callspec.id)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if needs_postgres(item):
            item.add_marker(pytest.mark.postgres)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    for marker, variable in (
        ("postgres", "CAIRNQ_REQUIRE_PG"),
        ("browser", "CAIRNQ_REQUIRE_BROWSER"),
    ):
        if (
            report.skipped
            and os.environ.get(variable) == "1"
            and item.get_closest_marker(marker) is not None
        ):
            report.outcome = "failed"
            report.longrepr = f"{marker} test skipped while {variable}=1: {report.longrepr}"
