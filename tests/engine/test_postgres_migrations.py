"""Postgres migrations, the schema guard (docs/protocol-notes.md, "Postgres") and the version check.

Catalog assertions compare against the names the protocol fixes (docs/protocol-notes.md,
"Schema and migrations" and "Indexes"), since those are what the other cairnq SDKs
look up.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import psycopg
import pytest
from schema_names import POSTGRES_MIGRATIONS, TASK_INDEXES

from engine import PostgresStore, ProtocolVersionMismatch, SchemaMismatch
from engine._sql import migrations

EXPECTED_LEDGER = POSTGRES_MIGRATIONS
EXPECTED_INDEXES = {
    "cairnq_tasks_pkey",
    *TASK_INDEXES,
    "cairnq_task_keys_pkey",
    "cairnq_meta_pkey",
    "cairnq_migrations_pkey",
}
EXPECTED_CONSTRAINTS = {
    "cairnq_tasks_pkey",
    "cairnq_tasks_status_check",
    "cairnq_task_keys_pkey",
    "cairnq_task_keys_task_id_fkey",
    "cairnq_meta_pkey",
    "cairnq_migrations_pkey",
}


def query(dsn: str, sql: str, schema: str = "public") -> list[tuple[object, ...]]:
    with psycopg.connect(dsn, autocommit=True, options=f"-c search_path={schema}") as conn:
        cur = conn.execute(sql)  # type: ignore[arg-type]
        return cur.fetchall() if cur.description else []


async def connected(dsn: str, **kwargs: object) -> PostgresStore:
    store = PostgresStore(dsn, max_size=2, **kwargs)  # type: ignore[arg-type]
    await store.connect()
    return store


async def test_fresh_database_gets_the_full_schema(pg_database: str) -> None:
    store = await connected(pg_database)
    await store.close()
    ledger = query(pg_database, "select name, applied_at_ms from cairnq_migrations order by name")
    assert [name for name, _ in ledger] == EXPECTED_LEDGER
    assert all(isinstance(ms, int) and ms > 1_600_000_000_000 for _, ms in ledger)
    assert dict(query(pg_database, "select key, value from cairnq_meta")) == {  # type: ignore[arg-type]
        "protocol_version": "1",
        "schema_version": "10",
    }
    indexes = {
        r[0]
        for r in query(pg_database, "select indexname from pg_indexes where schemaname = 'public'")
    }
    assert indexes == EXPECTED_INDEXES
    constraints = {
        r[0]
        for r in query(
            pg_database,
            "select conname from pg_constraint c join pg_namespace n on n.oid = c.connamespace "
            "where n.nspname = 'public'",
        )
    }
    # NOT NULL constraints are not catalogued before Postgres 18.
    assert {c for c in constraints if not c.endswith("_not_null")} == EXPECTED_CONSTRAINTS
    claim_idx = query(
        pg_database,
        "select indexdef from pg_indexes where indexname = 'cairnq_tasks_claim_idx'",
    )[0][0]
    assert "(queue, status, priority DESC, run_at_ms, id)" in str(claim_idx)
    trigger = query(
        pg_database,
        "select pg_get_triggerdef(t.oid) from pg_trigger t where t.tgname = 'cairnq_tasks_notify'",
    )
    assert len(trigger) == 1
    definition = str(trigger[0][0])
    assert "AFTER INSERT OR UPDATE OF status ON" in definition
    assert "FOR EACH ROW WHEN ((new.status IS DISTINCT FROM 'running'::text))" in definition
    assert "EXECUTE FUNCTION cairnq_notify()" in definition
    columns = query(
        pg_database,
        "select column_name, data_type, is_nullable, column_default "
        "from information_schema.columns "
        "where table_name = 'cairnq_tasks' and table_schema = 'public' order by ordinal_position",
    )
    assert [c[0] for c in columns][:5] == ["id", "name", "queue", "status", "payload"]
    assert [c[0] for c in columns][-3:] == ["created_at_ms", "updated_at_ms", "completed_at_ms"]
    by_name = {c[0]: c[1:] for c in columns}
    assert by_name["payload"] == ("jsonb", "NO", None)
    assert by_name["metadata"] == ("jsonb", "NO", "'{}'::jsonb")
    assert by_name["run_at_ms"] == ("bigint", "NO", None)
    assert by_name["max_attempts"] == ("integer", "NO", "3")


async def test_reconnect_applies_nothing_twice(pg_dsn: str, pg_schema: str) -> None:
    store = await connected(pg_dsn, schema=pg_schema)
    await store.close()
    before = query(pg_dsn, "select name, applied_at_ms from cairnq_migrations", pg_schema)
    store = await connected(pg_dsn, schema=pg_schema)
    await store.close()
    assert query(pg_dsn, "select name, applied_at_ms from cairnq_migrations", pg_schema) == before


async def test_partly_migrated_database_converges(pg_dsn: str, pg_schema: str) -> None:
    # Apply only the first three, as an older SDK would have left it.
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f'create schema "{pg_schema}"')  # type: ignore[arg-type]
        conn.execute(f'set search_path = "{pg_schema}"')  # type: ignore[arg-type]
        conn.execute(
            "create table cairnq_migrations (name text primary key, applied_at_ms bigint not null)"
        )
        for name, script in migrations("postgres")[:3]:
            psycopg.ClientCursor(conn).execute(script)  # type: ignore[arg-type]
            conn.execute("insert into cairnq_migrations values (%s, 0)", (name,))
        conn.execute("insert into cairnq_migrations values ('0099_from_the_future.sql', 0)")
    store = await connected(pg_dsn, schema=pg_schema)
    await store.close()
    names = [
        r[0] for r in query(pg_dsn, "select name from cairnq_migrations order by name", pg_schema)
    ]
    assert names == [*EXPECTED_LEDGER, "0099_from_the_future.sql"]
    assert query(
        pg_dsn, "select value from cairnq_meta where key = 'schema_version'", pg_schema
    ) == [("10",)]


COLD_START = textwrap.dedent(
    """
    import asyncio, sys
    sys.path.insert(0, {root!r})
    from engine import PostgresStore

    async def main():
        store = PostgresStore(sys.argv[1], max_size=1)
        await store.connect()
        await store.submit(name="cold")
        await store.close()

    asyncio.run(main())
    """
)


def test_concurrent_cold_starts_apply_each_migration_once(pg_database: str) -> None:
    script = COLD_START.format(root=str(Path(__file__).resolve().parents[2]))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, pg_database],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(3)
    ]
    # communicate() drains and closes both pipes (a pipe left open is a ResourceWarning).
    errors = [p.communicate(timeout=60)[1].decode() for p in procs]
    outcomes = [(p.returncode, err) for p, err in zip(procs, errors, strict=True)]
    assert all(code == 0 for code, _ in outcomes), outcomes
    # The ledger's primary key would have failed a second application loudly;
    # the rows also prove each name was recorded exactly once.
    assert [
        r[0] for r in query(pg_database, "select name from cairnq_migrations order by name")
    ] == (EXPECTED_LEDGER)
    assert query(pg_database, "select count(*) from cairnq_tasks") == [(3,)]


async def test_two_schemas_in_one_database_are_isolated(pg_dsn: str, pg_schema: str) -> None:
    other_schema = pg_schema + "_b"
    a = await connected(pg_dsn, schema=pg_schema)
    b = await connected(pg_dsn, schema=other_schema)
    try:
        ta = await a.submit(name="n", key="same-key")
        tb = await b.submit(name="n", key="same-key")
        assert ta.id != tb.id
        assert await b.get(ta.id) is None
        assert [t.id for t in await a.list()] == [ta.id]
        (claimed,) = await b.claim(queues=["default"], worker_id="w")
        assert claimed.id == tb.id
        assert (await a.get(ta.id)).status == "queued"  # type: ignore[union-attr]
        # A NOTIFY for b's queue reaches a's listener too (same database), which
        # may wake a's waiter early; a's poll still finds nothing.
        assert await a.claim(queues=["default", "x"], worker_id="w", names=["other"]) == []
    finally:
        await a.close()
        await b.close()
        query(pg_dsn, f'drop schema if exists "{other_schema}" cascade')


# -- schema guard: one test per row of the §4.20 table ----------------------------------------


async def test_guard_given_schema_equal_to_current_proceeds(pg_dsn: str, pg_schema: str) -> None:
    store = await connected(pg_dsn, schema=pg_schema)
    await store.close()


async def test_guard_given_schema_differs_from_current(pg_dsn: str, pg_schema: str) -> None:
    # read_only creates nothing, so the named schema does not exist and
    # current_schema() is NULL.
    store = PostgresStore(pg_dsn, schema=pg_schema, read_only=True)
    with pytest.raises(SchemaMismatch, match=pg_schema):
        await store.connect()
    # Once the schema exists it is current: the guard passes, and the empty
    # schema fails the version check instead (read_only migrates nothing).
    query(pg_dsn, f'create schema "{pg_schema}"')
    store = PostgresStore(pg_dsn, schema=pg_schema, read_only=True)
    with pytest.raises(ProtocolVersionMismatch):
        await store.connect()


async def test_guard_omitted_with_no_current_schema_proceeds(pg_dsn: str, pg_schema: str) -> None:
    dsn = f"{pg_dsn}?options=-c%20search_path%3D{pg_schema}_missing"
    store = PostgresStore(dsn, read_only=True)
    # The guard lets it through; the empty database then fails the version check.
    with pytest.raises(ProtocolVersionMismatch):
        await store.connect()


async def test_guard_omitted_on_fresh_and_on_own_installation(pg_database: str) -> None:
    store = await connected(pg_database)  # fresh: no installation anywhere
    await store.close()
    store = await connected(pg_database)  # the installation is in current_schema
    await store.close()


async def test_guard_omitted_with_installation_elsewhere(pg_database: str) -> None:
    elsewhere = await connected(pg_database, schema="elsewhere")
    await elsewhere.close()
    store = PostgresStore(pg_database)
    with pytest.raises(SchemaMismatch, match="elsewhere"):
        await store.connect()
    assert query(
        pg_database, "select count(*) from pg_tables where tablename = 'cairnq_tasks'"
    ) == [(1,)]


# -- protocol version ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "tamper",
    [
        "update cairnq_meta set value = '2' where key = 'protocol_version'",
        "delete from cairnq_meta where key = 'protocol_version'",
    ],
)
async def test_protocol_version_mismatch(pg_dsn: str, pg_schema: str, tamper: str) -> None:
    store = await connected(pg_dsn, schema=pg_schema)
    await store.close()
    query(pg_dsn, tamper, pg_schema)
    store = PostgresStore(pg_dsn, schema=pg_schema)
    with pytest.raises(ProtocolVersionMismatch):
        await store.connect()
