"""Concurrent cold starts on Postgres never fail (docs/protocol-notes.md, "Schema and migrations").

Four ``connect()`` at once on a schema that does not exist yet used to fail now
and then (about 3 %) with DuplicateObject (42710) on the ledger's row type, or
UniqueViolation (23505) on the schema: ``create ... if not exists`` races in the
catalog. Each try gets its own fresh schema; a few tries run side by side so the
200 of them stay quick.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from engine import PostgresStore

# 200 tries of four cold starts: 40-80 s measured on a busy two-core machine
# (the server shares its cores with the tests).
pytestmark = [pytest.mark.postgres, pytest.mark.slow]

AT_ONCE = 4  # connects racing on one schema
SIDE_BY_SIDE = 4  # tries in flight together, each on its own schema


@pytest.fixture
def schemas(pg_dsn: str) -> Iterator[list[str]]:
    """Names for fresh schemas; every one is dropped afterwards."""
    names: list[str] = []
    yield names
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        for name in names:
            conn.execute(f'drop schema if exists "{name}" cascade')  # type: ignore[arg-type]


def without_waiting_for_disk(dsn: str) -> str:
    """``dsn`` with commits that do not wait for the WAL flush: these throwaway
    schemas need no durability, and the ten DDL commits of each cold start are
    what makes 200 of them slow."""
    return make_conninfo(dsn, options="-c synchronous_commit=off")


async def cold_start_at_once(dsn: str, schema: str | None) -> str | None:
    """Connect AT_ONCE stores together; the first failure as text, None if all opened."""
    dsn = without_waiting_for_disk(dsn)
    stores = [PostgresStore(dsn, schema=schema, min_size=0, max_size=1) for _ in range(AT_ONCE)]
    try:
        outcomes = await asyncio.gather(*(s.connect() for s in stores), return_exceptions=True)
    finally:
        await asyncio.gather(*(s.close() for s in stores))
    errors = [o for o in outcomes if isinstance(o, BaseException)]
    return f"{type(errors[0]).__name__}: {errors[0]}" if errors else None


async def test_concurrent_cold_starts_on_fresh_schemas(pg_dsn: str, schemas: list[str]) -> None:
    tries = 200
    schemas.extend(f"cold_{uuid.uuid4().hex[:12]}" for _ in range(tries))
    failures: list[str] = []
    for first in range(0, tries, SIDE_BY_SIDE):
        batch = schemas[first : first + SIDE_BY_SIDE]
        outcomes = await asyncio.gather(*(cold_start_at_once(pg_dsn, s) for s in batch))
        failures.extend(o for o in outcomes if o is not None)
    assert failures == []


async def test_concurrent_cold_starts_in_the_public_schema(pg_database: str) -> None:
    # schema=None: the ledger lands in the database's public schema, emptied
    # again after each try so every try is a cold start.
    failures: list[str] = []
    for _ in range(50):
        outcome = await cold_start_at_once(pg_database, None)
        if outcome is not None:
            failures.append(outcome)
        with psycopg.connect(pg_database, autocommit=True) as conn:
            conn.execute("drop schema public cascade")
            conn.execute("create schema public")
    assert failures == []
