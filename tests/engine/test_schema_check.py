"""A database whose cairnq schema is not the protocol's is refused at open, with
``SchemaMismatch`` naming the difference, before anything is written; what does
not change behaviour (an extra nullable column, an extra plain index) is accepted.
On both dialects.

Each test builds a real database (by the engine, or by cairnq 0.15.1 run as a
black box), changes it by hand the way an operator or another tool could, then
opens it. "Nothing written" is checked on what the store could have touched: the
SQLite file's bytes and mtime, or the Postgres schema's catalog and rows.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest

from engine import PostgresStore, SchemaMismatch, SQLiteStore, TaskStore

DIALECTS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@dataclass(frozen=True)
class Rewrite:
    """SQLite only: edit a table's declared SQL in place, where no ALTER can."""

    table: str
    pattern: str
    replacement: str


class Database:
    """One database on either dialect: build it, change it, open it, fingerprint it."""

    def __init__(self, dialect: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
        self.dialect = dialect
        self.path = tmp_path / "tasks.db"
        if dialect == "postgres":
            self.dsn: str = request.getfixturevalue("pg_dsn")
            self.schema: str = request.getfixturevalue("pg_schema")

    def store(self, **options: Any) -> TaskStore:
        if self.dialect == "sqlite":
            return SQLiteStore(self.path, **options)
        return PostgresStore(self.dsn, schema=self.schema, max_size=2, **options)

    async def create(self) -> None:
        """A fresh database built by the engine."""
        store = self.store()
        await store.connect()
        await store.submit(name="existing", payload={"kept": True})
        await store.close()

    def run(self, *statements: str | Rewrite) -> None:
        """Change the database by hand, outside any store."""
        if self.dialect == "sqlite":
            with closing(sqlite3.connect(self.path, isolation_level=None)) as conn:
                for change in statements:
                    if isinstance(change, Rewrite):
                        rewrite(conn, change)
                    else:
                        conn.execute(change)
            return
        options = f"-c search_path={self.schema}"
        with psycopg.connect(self.dsn, autocommit=True, options=options) as conn:
            for sql in statements:
                conn.execute(sql)  # type: ignore[arg-type]

    def fingerprint(self) -> Any:
        """Everything an open could have changed."""
        if self.dialect == "sqlite":
            stat = self.path.stat()
            return self.path.read_bytes(), stat.st_mtime_ns
        options = f"-c search_path={self.schema}"
        with psycopg.connect(self.dsn, autocommit=True, options=options) as conn:
            return [
                conn.execute(sql, (self.schema,)).fetchall()  # type: ignore[arg-type]
                for sql in (
                    "select table_name, column_name, data_type, is_nullable from "
                    "information_schema.columns where table_schema = %s order by 1, 2",
                    "select indexname, indexdef from pg_indexes where schemaname = %s order by 1",
                    "select t.tgname, pg_get_triggerdef(t.oid) from pg_trigger t join pg_class c "
                    "on c.oid = t.tgrelid where c.relnamespace = %s::regnamespace "
                    "and not t.tgisinternal order by 1",
                    "select name, applied_at_ms, %s from cairnq_migrations order by 1",
                    "select key, value, %s from cairnq_meta order by 1",
                    "select id, status, updated_at_ms, %s from cairnq_tasks order by 1",
                )
            ]

    async def refused(self, *expected: str, **options: Any) -> str:
        """Open must fail with SchemaMismatch naming ``expected``, having written nothing."""
        before = self.fingerprint()
        store = self.store(**options)
        try:
            with pytest.raises(SchemaMismatch) as raised:
                await store.connect()
        finally:
            await store.close()
        message = str(raised.value)
        for part in expected:
            assert part in message
        assert self.fingerprint() == before
        return message

    async def accepted(self) -> None:
        """Open works, and the database then serves writes and reads."""
        store = self.store()
        await store.connect()
        try:
            task = await store.submit(name="after", payload={})
            (claimed,) = await store.claim(queues=["default"], worker_id="w", names=["after"])
            assert claimed.id == task.id
            assert [t.name for t in await store.list(name="existing")] == ["existing"]
        finally:
            await store.close()


def rewrite(conn: sqlite3.Connection, change: Rewrite) -> None:
    query = "select sql from sqlite_master where name = ?"
    (sql,) = conn.execute(query, (change.table,)).fetchone()
    edited, count = re.subn(change.pattern, change.replacement, sql, flags=re.IGNORECASE)
    assert count == 1, sql
    conn.execute("pragma writable_schema = on")
    conn.execute("update sqlite_master set sql = ? where name = ?", (edited, change.table))
    conn.execute("pragma writable_schema = off")


@pytest.fixture(params=DIALECTS)
async def db(request: pytest.FixtureRequest, tmp_path: Path) -> Database:
    database = Database(request.param, tmp_path, request)
    await database.create()
    return database


# -- refused ------------------------------------------------------------------------------

ADD_SQLITE_TRIGGER = (
    "create trigger audit after insert on cairnq_tasks "
    "begin update cairnq_meta set value = value where key = 'x'; end",
)
ADD_POSTGRES_TRIGGER = (
    "create function audit() returns trigger language plpgsql as $$ begin return null; end $$",
    "create trigger audit after insert on cairnq_tasks for each row execute function audit()",
)
SAME = "same on both"

#: (what is changed, on SQLite, on Postgres (SAME: as on SQLite; None: not on this
#: dialect), what the refusal must say).
Change = Sequence["str | Rewrite"]
REFUSED: list[tuple[str, Change | None, Change | str | None, str]] = [
    ("missing table", ["drop table cairnq_task_keys"], SAME, "table cairnq_task_keys missing"),
    # The symptom that started this: such a file opened, was written to, then
    # every list or submit failed with "no such column".
    (
        "missing column",
        ["alter table cairnq_tasks drop column message"],
        SAME,
        "table cairnq_tasks: column message missing",
    ),
    (
        "missing index",
        ["drop index cairnq_tasks_lease_idx"],
        SAME,
        "index cairnq_tasks_lease_idx missing",
    ),
    (
        "changed index columns",  # priority ascending: claims would walk it the wrong way
        [
            "drop index cairnq_tasks_claim_idx",
            "create index cairnq_tasks_claim_idx "
            "on cairnq_tasks (queue, status, priority, run_at_ms, id)",
        ],
        SAME,
        "index cairnq_tasks_claim_idx: columns (queue, status, priority, run_at_ms, id), "
        "expected (queue, status, priority desc, run_at_ms, id)",
    ),
    (
        "changed index predicate",
        [
            "drop index cairnq_tasks_lease_idx",
            "create index cairnq_tasks_lease_idx on cairnq_tasks (lease_until_ms) "
            "where status = 'queued'",
        ],
        SAME,
        "index cairnq_tasks_lease_idx: predicate",
    ),
    (
        "index dropped by 0010 is back",
        ["create index cairnq_tasks_status_idx on cairnq_tasks (status)"],
        SAME,
        "index cairnq_tasks_status_idx exists",
    ),
    (
        "extra unique index",
        ["create unique index tasks_by_name on cairnq_tasks (name)"],
        SAME,
        "extra unique index tasks_by_name on cairnq_tasks",
    ),
    (
        "extra trigger",
        ADD_SQLITE_TRIGGER,
        ADD_POSTGRES_TRIGGER,
        "extra trigger audit on cairnq_tasks",
    ),
    # SQLite has no protocol trigger to lose.
    (
        "missing trigger",
        None,
        ["drop trigger cairnq_tasks_notify on cairnq_tasks"],
        "trigger cairnq_tasks_notify missing",
    ),
    (
        "disabled trigger",
        None,
        ["alter table cairnq_tasks disable trigger cairnq_tasks_notify"],
        "trigger cairnq_tasks_notify is disabled",
    ),
    # SQLite's ALTER cannot change these, so its declaration is edited instead.
    (
        "wrong column type (sqlite)",
        [Rewrite("cairnq_tasks", r"\bpriority\s+integer\b", "priority TEXT")],
        None,
        "table cairnq_tasks: column priority has type TEXT, expected INTEGER",
    ),
    (
        "wrong column type (postgres)",
        None,
        ["alter table cairnq_tasks alter column priority type bigint"],
        "table cairnq_tasks: column priority has type bigint, expected integer",
    ),
    (
        "column made nullable",
        [Rewrite("cairnq_tasks", r"\brun_at_ms\s+integer\s+not\s+null", "run_at_ms INTEGER")],
        ["alter table cairnq_tasks alter column run_at_ms drop not null"],
        "table cairnq_tasks: column run_at_ms is nullable, expected not null",
    ),
    (
        "extra not null column without default",
        [Rewrite("cairnq_meta", r"\)\s*$", ", owner TEXT NOT NULL)")],
        [
            "alter table cairnq_meta add column owner text not null default 'x'",
            "alter table cairnq_meta alter column owner drop default",
        ],
        "table cairnq_meta: extra column owner is not null without a default",
    ),
    (
        "extra column before the protocol's (sqlite)",
        [Rewrite("cairnq_tasks", r"\bname\s+text\s+not\s+null,", "note TEXT, name TEXT NOT NULL,")],
        None,
        "table cairnq_tasks: columns out of the protocol's order",
    ),
    (
        "missing foreign key cascade",
        [Rewrite("cairnq_task_keys", r"\s+on\s+delete\s+cascade", "")],
        ["alter table cairnq_task_keys drop constraint cairnq_task_keys_task_id_fkey"],
        "table cairnq_task_keys: foreign key task_id -> cairnq_tasks(id)",
    ),
]


def _refusals() -> list[Any]:
    """One case per dialect that can have the difference (none is generated to be skipped)."""
    cases = []
    for name, on_sqlite, on_postgres, expected in REFUSED:
        if on_sqlite is not None:
            cases.append(pytest.param("sqlite", on_sqlite, expected, id=f"sqlite-{name}"))
        on_pg = on_sqlite if on_postgres == SAME else on_postgres
        if on_pg is not None:
            cases.append(
                pytest.param(
                    "postgres", on_pg, expected, id=f"postgres-{name}", marks=pytest.mark.postgres
                )
            )
    return cases


@pytest.mark.parametrize(("db", "change", "expected"), _refusals(), indirect=["db"])
async def test_refused(db: Database, change: Change | str, expected: str) -> None:
    assert not isinstance(change, str)
    db.run(*change)
    await db.refused(expected)


async def test_every_difference_is_named(db: Database) -> None:
    db.run(
        "alter table cairnq_tasks drop column message",
        "drop index cairnq_tasks_name_idx",
    )
    await db.refused("column message missing", "index cairnq_tasks_name_idx missing")


async def test_read_only_open_is_refused_too(db: Database) -> None:
    db.run("alter table cairnq_tasks drop column message")
    await db.refused("table cairnq_tasks: column message missing", read_only=True)


async def test_partly_migrated_database_is_refused_before_migrating(db: Database) -> None:
    # The ledger lacks 0009 (so its index is due to be created), and a column is
    # gone: nothing may be migrated into a table that is not the protocol's.
    db.run(
        "delete from cairnq_migrations where name = '0009_purge_queue_index.sql'",
        "drop index cairnq_tasks_queue_completed_idx",
        "alter table cairnq_tasks drop column message",
    )
    await db.refused("table cairnq_tasks: column message missing")


# -- accepted -----------------------------------------------------------------------------


async def test_fresh_engine_database_reopens(db: Database) -> None:
    await db.accepted()


async def test_extra_nullable_column_and_plain_index_are_accepted(db: Database) -> None:
    db.run(
        "alter table cairnq_tasks add column note text",
        "alter table cairnq_tasks add column shard integer not null default 0",
        "create index tasks_by_worker on cairnq_tasks (worker_id)",
        "create table unrelated (id integer primary key, label text not null)",
    )
    await db.accepted()


async def test_partly_migrated_database_is_migrated_then_checked(db: Database) -> None:
    db.run(
        "delete from cairnq_migrations where name = '0009_purge_queue_index.sql'",
        "drop index cairnq_tasks_queue_completed_idx",
    )
    await db.accepted()


@pytest.mark.peer
@pytest.mark.parametrize("dialect", DIALECTS)
async def test_database_created_by_cairnq_opens(
    dialect: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    cairnq = pytest.importorskip("cairnq")
    database = Database(dialect, tmp_path, request)
    if dialect == "sqlite":
        peer = cairnq.SQLiteStore(str(database.path))
    else:
        peer = cairnq.PostgresStore(database.dsn, schema=database.schema)
    await peer.connect()
    await peer.submit(name="existing", payload={"kept": True})
    await peer.close()
    await database.accepted()
