"""Concurrent cold starts on Postgres never fail (docs/protocol-notes.md, "Schema and migrations").

Four ``connect()`` at once on a schema that does not exist yet used to fail now
and then (about 3 %) with DuplicateObject (42710) on the ledger's row type, or
UniqueViolation (23505) on the schema: ``create ... if not exists`` races in the
catalog. The first tests replay that race deterministically: another session
holds the same creation uncommitted while ``connect()`` creates, and commits once
``connect()`` is seen waiting on it. The last two race real cold starts
side by side, as a smoke test of the whole path.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from engine import PostgresStore

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


async def waiting_on_a_lock(dsn: str, application_name: str) -> None:
    """Return once the session named ``application_name`` waits on a lock."""
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as watcher:
        for _ in range(2_000):
            cursor = await watcher.execute(
                "select 1 from pg_stat_activity"
                " where application_name = %s and wait_event_type = 'Lock'",
                (application_name,),
            )
            if await cursor.fetchone() is not None:
                return
            await asyncio.sleep(0.005)
    raise AssertionError(f"{application_name} never waited on the other session's creation")


async def connect_while_a_peer_creates(dsn: str, schema: str, peer_ddl: list[str]) -> None:
    """``connect()`` a store on ``schema`` while another session (a peer that does not
    take the engine's cold-start lock, such as the cairnq SDK) has run ``peer_ddl``
    in an open transaction; the peer commits once the store waits on it."""
    name = f"cold-{uuid.uuid4().hex[:8]}"
    store = PostgresStore(
        make_conninfo(dsn, application_name=name), schema=schema, min_size=0, max_size=1
    )
    async with await psycopg.AsyncConnection.connect(dsn) as peer:
        for ddl in peer_ddl:
            await peer.execute(ddl)  # type: ignore[arg-type]
        opening = asyncio.ensure_future(store.connect())
        try:
            waiting = asyncio.ensure_future(waiting_on_a_lock(dsn, name))
            await asyncio.wait({opening, waiting}, return_when=asyncio.FIRST_COMPLETED)
            if opening.done():
                waiting.cancel()
                opening.result()
                raise AssertionError("connect() finished without meeting the peer's creation")
            await waiting
            await peer.commit()
            await opening
        finally:
            await store.close()


async def test_a_schema_created_by_a_peer_meanwhile_is_used(
    pg_dsn: str, schemas: list[str]
) -> None:
    schema = f"cold_{uuid.uuid4().hex[:12]}"
    schemas.append(schema)
    await connect_while_a_peer_creates(pg_dsn, schema, [f'create schema "{schema}"'])
    await assert_migrated(pg_dsn, schema)


async def test_a_ledger_created_by_a_peer_meanwhile_is_used(
    pg_dsn: str, schemas: list[str]
) -> None:
    schema = f"cold_{uuid.uuid4().hex[:12]}"
    schemas.append(schema)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f'create schema "{schema}"')  # type: ignore[arg-type]
    ledger = (
        f'create table if not exists "{schema}".cairnq_migrations ('
        "name text primary key, applied_at_ms bigint not null)"
    )
    await connect_while_a_peer_creates(pg_dsn, schema, [ledger])
    await assert_migrated(pg_dsn, schema)


async def assert_migrated(dsn: str, schema: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            f'select count(*) from "{schema}".cairnq_migrations'  # type: ignore[arg-type]
        ).fetchone()
        assert row is not None and row[0] > 0


async def test_concurrent_cold_starts_on_fresh_schemas(pg_dsn: str, schemas: list[str]) -> None:
    # 80 tries: the race this guards against struck about 3 % of tries (91 % to
    # catch it here); the two tests above replay its catalog collision every time.
    tries = 80
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
    for _ in range(15):
        outcome = await cold_start_at_once(pg_database, None)
        if outcome is not None:
            failures.append(outcome)
        with psycopg.connect(pg_database, autocommit=True) as conn:
            conn.execute("drop schema public cascade")
            conn.execute("create schema public")
    assert failures == []
