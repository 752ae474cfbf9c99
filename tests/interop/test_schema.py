"""The engine and cairnq 0.15.1 build the same database, and each opens the other's.

Compared through the catalogs (what a schema *is*), never through DDL text: on
SQLite the PRAGMAs of every table and index, the object list, the normalised
partial-index predicates and how CHECK / NOT NULL / FK constraints behave; on
Postgres information_schema, pg_constraint, pg_indexes, the trigger definition
and what the NOTIFY function actually sends. Plus the ledger and meta rows.
"""

from __future__ import annotations

import re
import sqlite3
import uuid
from contextlib import closing
from pathlib import Path
from typing import Any

import psycopg
import pytest
from interop_support import Backend, cairnq, ledger, meta, rows
from schema_names import SQLITE_MIGRATIONS, TASK_INDEXES

from engine.store.postgres import PostgresStore
from engine.store.sqlite import SQLiteStore

pytestmark = pytest.mark.peer

SQLITE_LEDGER = SQLITE_MIGRATIONS
POSTGRES_LEDGER = sorted([*SQLITE_LEDGER, "0003_notify.sql"])
META = [("protocol_version", "1"), ("schema_version", "10")]


def tokens(sql: str) -> list[str]:
    """An SQL fragment as lower-case tokens without redundant outer parentheses."""
    out = re.findall(r"'[^']*'|\w+|[^\s\w]", sql.lower())
    while out[:1] == ["("] and out[-1:] == [")"] and _balanced(out[1:-1]):
        out = out[1:-1]
    return out


def _balanced(parts: list[str]) -> bool:
    depth = 0
    for part in parts:
        depth += {"(": 1, ")": -1}.get(part, 0)
        if depth < 0:
            return False
    return depth == 0


async def create(store: Any) -> None:
    await store.connect()
    await store.close()


# -- SQLite ---------------------------------------------------------------------


def sqlite_schema(path: Path) -> dict[str, Any]:
    """Everything SQLite's catalogs say about the cairnq objects in one file."""
    with closing(sqlite3.connect(path)) as db:
        objects = sorted(
            db.execute(
                "select type, name, tbl_name from sqlite_master where name not like 'sqlite_stat%'"
            )
        )
        schema: dict[str, Any] = {"objects": objects}
        for kind, name, _table in objects:
            if kind == "table":
                schema[f"table {name}"] = {
                    "table_list": list(
                        db.execute(
                            "select type, ncol, wr, strict from pragma_table_list(?)", (name,)
                        )
                    ),
                    "table_xinfo": list(db.execute("select * from pragma_table_xinfo(?)", (name,))),
                    "index_list": sorted(
                        db.execute(
                            'select name, "unique", origin, partial from pragma_index_list(?)',
                            (name,),
                        )
                    ),
                    "foreign_key_list": list(
                        db.execute("select * from pragma_foreign_key_list(?)", (name,))
                    ),
                }
            elif kind == "index":
                (sql,) = db.execute(
                    "select sql from sqlite_master where type = 'index' and name = ?", (name,)
                ).fetchone()
                where = None
                if sql is not None and re.search(r"\bwhere\b", sql, re.IGNORECASE):
                    where = tokens(re.split(r"\bwhere\b", sql, maxsplit=1, flags=re.IGNORECASE)[1])
                schema[f"index {name}"] = {
                    # seqno, cid, name, desc, coll, key: direction and key flag included.
                    "index_xinfo": list(db.execute("select * from pragma_index_xinfo(?)", (name,))),
                    "where": where,
                }
        schema["ledger"] = [
            r[0] for r in db.execute("select name from cairnq_migrations order by name")
        ]
        schema["meta"] = list(db.execute("select key, value from cairnq_meta order by key"))
    return schema


def assert_same(ours: dict[str, Any], theirs: dict[str, Any]) -> None:
    assert ours.keys() == theirs.keys()
    for key in ours:
        assert ours[key] == theirs[key], (
            f"{key} differs:\nengine: {ours[key]}\ncairnq: {theirs[key]}"
        )


async def test_sqlite_schema_is_identical_to_cairnq(tmp_path: Path) -> None:
    await create(cairnq.SQLiteStore(str(tmp_path / "peer.db")))
    await create(SQLiteStore(str(tmp_path / "engine.db")))
    theirs = sqlite_schema(tmp_path / "peer.db")
    ours = sqlite_schema(tmp_path / "engine.db")
    assert_same(ours, theirs)

    # And it is the protocol's schema, not merely the same mistake twice.
    assert ours["ledger"] == SQLITE_LEDGER
    assert ours["meta"] == META
    indexes = {
        name for kind, name, table in ours["objects"] if kind == "index" and table == "cairnq_tasks"
    }
    assert {i for i in indexes if not i.startswith("sqlite_autoindex")} == TASK_INDEXES
    assert ours["index cairnq_tasks_lease_idx"]["where"] == tokens(
        "status = 'running' and lease_until_ms is not null"
    )
    columns = [row[1] for row in ours["table cairnq_tasks"]["table_xinfo"]]
    assert columns[:4] == ["id", "name", "queue", "status"]
    assert columns[-1] == "completed_at_ms" and len(columns) == 23


def sqlite_constraint_outcomes(path: Path) -> dict[str, str]:
    """Try good and bad rows on one file; what each attempt did, rolled back after."""
    base = {
        "id": "task_x",
        "name": "n",
        "status": "queued",
        "payload": "{}",
        "run_at_ms": 1,
        "created_at_ms": 1,
        "updated_at_ms": 1,
    }
    attempts: dict[str, dict[str, Any]] = {
        "valid": {},
        "bad status": {"status": "paused"},
        "payload not json": {"payload": "{nope"},
        "payload null": {"payload": None},
        "metadata not json": {"metadata": "[1,"},
        "result not json": {"result": "x"},
        "error not json": {"error": "{"},
        "run_at_ms null": {"run_at_ms": None},
        "name null": {"name": None},
    }
    outcomes: dict[str, str] = {}
    with closing(sqlite3.connect(path, isolation_level=None)) as db:
        db.execute("pragma foreign_keys = on")
        for label, change in attempts.items():
            row = {**base, **change}
            db.execute("begin")
            try:
                columns, marks = ", ".join(row), ", ".join("?" * len(row))
                db.execute(
                    f"insert into cairnq_tasks ({columns}) values ({marks})", tuple(row.values())
                )
                defaults = db.execute(
                    "select queue, metadata, attempt, max_attempts, priority, result, error "
                    "from cairnq_tasks where id = 'task_x'"
                ).fetchone()
                outcomes[label] = f"ok {defaults}"
            except sqlite3.IntegrityError as exc:
                outcomes[label] = f"refused: {str(exc).split(':')[0]}"
            finally:
                db.execute("rollback")
        db.execute("begin")
        try:
            db.execute(
                "insert into cairnq_task_keys (key, task_id, created_at_ms, updated_at_ms) "
                "values ('k', 'task_missing', 1, 1)"
            )
            outcomes["key to missing task"] = "ok"
        except sqlite3.IntegrityError as exc:
            outcomes["key to missing task"] = f"refused: {exc}"
        db.execute("rollback")
        db.execute("begin")
        db.execute(
            "insert into cairnq_tasks (id, name, status, payload, run_at_ms, created_at_ms, "
            "updated_at_ms) values ('task_y', 'n', 'failed', '{}', 1, 1, 1)"
        )
        db.execute(
            "insert into cairnq_task_keys (key, task_id, created_at_ms, updated_at_ms) "
            "values ('k', 'task_y', 1, 1)"
        )
        db.execute("delete from cairnq_tasks where id = 'task_y'")
        outcomes["key rows left after delete"] = str(
            db.execute("select count(*) from cairnq_task_keys").fetchone()[0]
        )
        db.execute("rollback")
    return outcomes


async def test_sqlite_constraints_behave_as_cairnqs(tmp_path: Path) -> None:
    await create(cairnq.SQLiteStore(str(tmp_path / "peer.db")))
    await create(SQLiteStore(str(tmp_path / "engine.db")))
    ours = sqlite_constraint_outcomes(tmp_path / "engine.db")
    assert ours == sqlite_constraint_outcomes(tmp_path / "peer.db")
    assert ours["valid"] == "ok ('default', '{}', 0, 3, 0, None, None)"
    for label in (
        "bad status",
        "payload not json",
        "metadata not json",
        "result not json",
        "error not json",
    ):
        assert ours[label] == "refused: CHECK constraint failed", label
    for label in ("payload null", "run_at_ms null", "name null"):
        assert ours[label] == "refused: NOT NULL constraint failed", label
    assert ours["key to missing task"] == "refused: FOREIGN KEY constraint failed"
    assert ours["key rows left after delete"] == "0"


# -- Postgres -------------------------------------------------------------------


def pg_schema_snapshot(dsn: str, schema: str) -> dict[str, Any]:
    """information_schema and pg_catalog facts about one schema's cairnq objects."""
    # search_path = the schema, so pg_get_*def print names unqualified in both.
    with psycopg.connect(dsn, options=f"-c search_path={schema}") as conn:

        def q(sql: str) -> list[tuple[Any, ...]]:
            return [tuple(r) for r in conn.execute(sql, {"s": schema})]

        def unqualify(text: str) -> str:
            return " ".join(text.replace(f'"{schema}".', "").replace(f"{schema}.", "").split())

        return {
            "tables": q(
                "select table_name, table_type from information_schema.tables "
                "where table_schema = %(s)s order by table_name"
            ),
            "columns": q(
                "select table_name, ordinal_position, column_name, data_type, is_nullable, "
                "column_default from information_schema.columns where table_schema = %(s)s "
                "order by table_name, ordinal_position"
            ),
            "constraints": [
                (table, name, kind, unqualify(definition))
                for table, name, kind, definition in q(
                    "select conrelid::regclass::text, conname, contype, pg_get_constraintdef(oid) "
                    "from pg_constraint where connamespace = %(s)s::regnamespace "
                    "order by conname"
                )
            ],
            "indexes": [
                (table, name, unqualify(definition))
                for table, name, definition in q(
                    "select tablename, indexname, indexdef from pg_indexes "
                    "where schemaname = %(s)s order by indexname"
                )
            ],
            "functions": q(
                "select p.proname, p.prokind, p.prorettype::regtype::text, l.lanname, "
                "p.provolatile, p.pronargs from pg_proc p join pg_language l on l.oid = p.prolang "
                "where p.pronamespace = %(s)s::regnamespace order by p.proname"
            ),
            "triggers": [
                (name, enabled, unqualify(definition))
                for name, enabled, definition in q(
                    "select t.tgname, t.tgenabled, pg_get_triggerdef(t.oid) from pg_trigger t "
                    "join pg_class c on c.oid = t.tgrelid "
                    "where c.relnamespace = %(s)s::regnamespace and not t.tgisinternal "
                    "order by t.tgname"
                )
            ],
            "ledger": [r[0] for r in q("select name from cairnq_migrations order by name")],
            "meta": q("select key, value from cairnq_meta order by key"),
        }


def notifications_from_writes(dsn: str, schema: str) -> list[tuple[str, str]]:
    """Drive status changes by hand and record what the trigger announces.

    Payloads are relabelled (queue names and ids are unique to this run), and
    notifications from anyone else on the server are ignored.
    """
    tag = uuid.uuid4().hex[:8]
    labels = {f"qa_{tag}": "qa", f"task_a_{tag}": "A", f"task_b_{tag}": "B", f"task_c_{tag}": "C"}
    end = f"end_{tag}"

    def insert(task_id: str, status: str) -> str:
        return (
            "insert into cairnq_tasks (id, name, queue, status, payload, run_at_ms, "
            f"created_at_ms, updated_at_ms) values ('{task_id}_{tag}', 'n', 'qa_{tag}', "
            f"'{status}', '{{}}', 1, 1, 1)"
        )

    def status(task_id: str, value: str) -> str:
        return f"update cairnq_tasks set status = '{value}' where id = '{task_id}_{tag}'"

    writes = [
        insert("task_a", "queued"),  # insert queued: announce the queue
        status("task_a", "running"),  # claims never notify
        status("task_a", "queued"),  # a requeue announces the queue
        status("task_a", "queued"),  # no change of status: nothing
        f"update cairnq_tasks set priority = 5 where id = 'task_a_{tag}'",  # not OF status
        status("task_a", "running"),
        status("task_a", "succeeded"),  # entering terminal: announce the id
        status("task_a", "failed"),  # terminal to terminal: nothing
        status("task_a", "queued"),  # retry: announce the queue
        insert("task_b", "running"),  # the trigger's condition skips running rows
        status("task_b", "canceled"),  # running -> terminal: announce the id
        insert("task_c", "failed"),  # an insert is never "done"
    ]
    with psycopg.connect(dsn, autocommit=True, options=f"-c search_path={schema}") as conn:
        conn.execute("listen cairnq_queued")
        conn.execute("listen cairnq_done")
        for sql in writes:
            conn.execute(sql)
        conn.execute("select pg_notify('cairnq_done', %s)", (end,))
        seen: list[tuple[str, str]] = []
        for note in conn.notifies(timeout=10):
            if note.payload == end:
                break
            if note.payload in labels:
                seen.append((note.channel, labels[note.payload]))
        else:
            pytest.fail("the end marker never arrived")
    return seen


@pytest.mark.postgres
async def test_postgres_schema_is_identical_to_cairnq(
    pg_dsn: str, pg_two_schemas: tuple[str, str]
) -> None:
    peer_schema, engine_schema = pg_two_schemas
    await create(cairnq.PostgresStore(pg_dsn, schema=peer_schema, max_size=2))
    await create(PostgresStore(pg_dsn, schema=engine_schema, max_size=2))
    theirs = pg_schema_snapshot(pg_dsn, peer_schema)
    ours = pg_schema_snapshot(pg_dsn, engine_schema)
    assert_same(ours, theirs)

    assert ours["ledger"] == POSTGRES_LEDGER
    assert ours["meta"] == META
    assert {name for table, name, _ in ours["indexes"] if table == "cairnq_tasks"} == {
        *TASK_INDEXES,
        "cairnq_tasks_pkey",
    }
    assert {name for _, name, _, _ in ours["constraints"]} == {
        "cairnq_tasks_pkey",
        "cairnq_tasks_status_check",
        "cairnq_task_keys_pkey",
        "cairnq_task_keys_task_id_fkey",
        "cairnq_meta_pkey",
        "cairnq_migrations_pkey",
    }
    assert [name for name, _, _ in ours["triggers"]] == ["cairnq_tasks_notify"]
    assert [row[0] for row in ours["functions"]] == ["cairnq_notify"]


@pytest.mark.postgres
async def test_postgres_notify_function_behaves_as_cairnqs(
    pg_dsn: str, pg_two_schemas: tuple[str, str]
) -> None:
    peer_schema, engine_schema = pg_two_schemas
    await create(cairnq.PostgresStore(pg_dsn, schema=peer_schema, max_size=2))
    await create(PostgresStore(pg_dsn, schema=engine_schema, max_size=2))
    ours = notifications_from_writes(pg_dsn, engine_schema)
    assert ours == notifications_from_writes(pg_dsn, peer_schema)
    assert ours == [
        ("cairnq_queued", "qa"),
        ("cairnq_queued", "qa"),
        ("cairnq_done", "A"),
        ("cairnq_queued", "qa"),
        ("cairnq_done", "B"),
    ]


# -- Opening each other's database (both dialects) -------------------------------


@pytest.mark.parametrize(("creator", "opener"), [("peer", "engine"), ("engine", "peer")])
async def test_a_database_created_by_one_side_opens_in_the_other(
    backend: Backend, creator: str, opener: str
) -> None:
    await create(backend.side(creator))
    before_ledger, before_meta = ledger(backend), meta(backend)

    store = backend.side(opener)
    await store.connect()
    try:
        assert await store.protocol_version() == 1
        task = await store.submit(name="opened", payload={"by": opener})
        assert (await store.get(task.id)).payload == {"by": opener}
    finally:
        await store.close()

    # Nothing re-applied: same names, same application times, same meta.
    assert ledger(backend) == before_ledger
    assert meta(backend) == before_meta
    expected = SQLITE_LEDGER if backend.dialect == "sqlite" else POSTGRES_LEDGER
    assert [name for name, _ in before_ledger] == expected
    assert before_meta == META

    # And the creator reopens it unchanged after the other side wrote to it.
    again = backend.side(creator)
    await again.connect()
    try:
        assert (await again.get(task.id)).payload == {"by": opener}
    finally:
        await again.close()
    assert ledger(backend) == before_ledger


@pytest.mark.postgres
@pytest.mark.parametrize(("creator", "opener"), [("peer", "engine"), ("engine", "peer")])
async def test_public_schema_created_by_one_side_opens_in_the_other(
    pg_database: str, creator: str, opener: str
) -> None:
    # No schema option on either side: both land in public and the guards agree.
    backend = Backend("postgres", pg_database, None)
    await create(backend.side(creator))
    before = ledger(backend)
    await create(backend.side(opener))
    assert ledger(backend) == before
    assert rows(backend, "select schemaname from pg_tables where tablename = 'cairnq_tasks'") == [
        ("public",)
    ]
