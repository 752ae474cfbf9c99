"""SQLiteStore's open sequence: schema, migrations, modes, and refusals that write nothing."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from schema_names import SQLITE_MIGRATIONS, TASK_INDEXES

from engine import (
    ProtocolVersionMismatch,
    SerializationError,
    SQLiteStore,
    StoreClosed,
    StoreUnavailable,
)
from engine._sql import statement

MIGRATIONS = SQLITE_MIGRATIONS
COLUMNS = [
    "id", "name", "queue", "status", "payload", "result", "error", "metadata", "progress",
    "message", "attempt", "max_attempts", "priority", "worker_id", "lease_until_ms",
    "run_at_ms", "cancel_requested_at_ms", "parent_id", "root_id", "correlation_id",
    "created_at_ms", "updated_at_ms", "completed_at_ms",
]  # fmt: skip


def query(path: Path, sql: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(path) as conn:
        return conn.execute(sql).fetchall()


def snapshot(path: Path) -> bytes:
    """Everything a write could change: the file plus its WAL."""
    wal = Path(f"{path}-wal")
    return path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")


async def make_database(path: Path) -> None:
    store = SQLiteStore(path)
    await store.connect()
    await store.close()


async def test_fresh_database_final_schema(sqlite_path: Path) -> None:
    await make_database(sqlite_path)
    assert query(sqlite_path, "pragma journal_mode") == [("wal",)]
    assert [r[0] for r in query(sqlite_path, "select name from cairnq_migrations")] == MIGRATIONS
    assert dict(query(sqlite_path, "select key, value from cairnq_meta")) == {
        "protocol_version": "1",
        "schema_version": "10",
    }
    info = query(sqlite_path, "pragma table_info(cairnq_tasks)")
    assert [r[1] for r in info] == COLUMNS
    notnull = {r[1] for r in info if r[3]}
    assert notnull == {
        "name", "queue", "status", "payload", "metadata", "attempt", "max_attempts",
        "priority", "run_at_ms", "created_at_ms", "updated_at_ms",
    }  # fmt: skip
    indexes = {
        r[0]
        for r in query(
            sqlite_path,
            "select name from sqlite_master where type = 'index' and name not like 'sqlite_%'",
        )
    }
    assert indexes == TASK_INDEXES
    claim = query(sqlite_path, "pragma index_xinfo(cairnq_tasks_claim_idx)")
    assert [(r[2], r[3]) for r in claim if r[5]] == [
        ("queue", 0),
        ("status", 0),
        ("priority", 1),
        ("run_at_ms", 0),
        ("id", 0),
    ]
    fk = query(sqlite_path, "pragma foreign_key_list(cairnq_task_keys)")
    assert [(r[2], r[3], r[4], r[6]) for r in fk] == [("cairnq_tasks", "task_id", "id", "CASCADE")]


async def test_reopen_applies_nothing_twice(sqlite_path: Path) -> None:
    await make_database(sqlite_path)
    first = query(sqlite_path, "select name, applied_at_ms from cairnq_migrations")
    await make_database(sqlite_path)
    assert query(sqlite_path, "select name, applied_at_ms from cairnq_migrations") == first


async def test_partly_migrated_database_is_completed(sqlite_path: Path) -> None:
    await make_database(sqlite_path)
    with sqlite3.connect(sqlite_path) as conn:
        # Roll the database back to its 0007 state (the shapes of 0001/0006).
        conn.execute("delete from cairnq_migrations where name >= '0008'")
        conn.execute("drop index cairnq_tasks_claim_idx")
        conn.execute("drop index cairnq_tasks_queue_completed_idx")
        conn.execute(
            "create index cairnq_tasks_claim_idx on cairnq_tasks "
            "(queue, status, priority desc, created_at_ms)"
        )
        conn.execute("create index cairnq_tasks_status_idx on cairnq_tasks (status)")
        conn.execute("update cairnq_meta set value = '7' where key = 'schema_version'")
        conn.execute("insert into cairnq_migrations values ('9999_from_a_newer_sdk.sql', 1)")
    await make_database(sqlite_path)
    names = [r[0] for r in query(sqlite_path, "select name from cairnq_migrations")]
    assert names == [*MIGRATIONS, "9999_from_a_newer_sdk.sql"]
    assert query(sqlite_path, "select value from cairnq_meta where key = 'schema_version'") == [
        ("10",)
    ]
    claim = query(sqlite_path, "pragma index_info(cairnq_tasks_claim_idx)")
    assert [r[2] for r in claim] == ["queue", "status", "priority", "run_at_ms", "id"]
    assert not query(
        sqlite_path, "select 1 from sqlite_master where name = 'cairnq_tasks_status_idx'"
    )


async def test_migration_0005_clears_terminal_leases(sqlite_path: Path) -> None:
    await make_database(sqlite_path)
    with sqlite3.connect(sqlite_path) as conn:
        conn.execute(
            "insert into cairnq_tasks (id, name, status, payload, run_at_ms, created_at_ms, "
            "updated_at_ms, lease_until_ms) values ('t1', 'x', 'failed', '{}', 1, 1, 1, 99)"
        )
        conn.execute("delete from cairnq_migrations where name = '0005_clear_terminal_lease.sql'")
    await make_database(sqlite_path)
    assert query(sqlite_path, "select lease_until_ms from cairnq_tasks") == [(None,)]


async def test_parent_directory_is_created(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "tasks.db"
    await make_database(path)
    assert path.is_file()


async def test_directory_path_is_refused(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path)
    with pytest.raises(StoreUnavailable, match="directory") as info:
        await store.connect()
    assert str(tmp_path) in str(info.value)
    assert list(tmp_path.iterdir()) == []


async def test_unwritable_location_is_refused(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    store = SQLiteStore(blocker / "sub" / "tasks.db")
    with pytest.raises(StoreUnavailable, match="cannot create its directory") as info:
        await store.connect()
    assert str(blocker) in str(info.value)
    assert blocker.read_text() == "not a directory"


async def test_read_only_directory_is_refused(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        # Root ignores permission bits; sysfs refuses file creation even to root.
        with pytest.raises(StoreUnavailable, match=r"/sys/cairnq-tasks\.db"):
            await SQLiteStore(Path("/sys/cairnq-tasks.db")).connect()
        assert not Path("/sys/cairnq-tasks.db").exists()
        return
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        with pytest.raises(StoreUnavailable, match="not writable"):
            await SQLiteStore(locked / "tasks.db").connect()
        assert list(locked.iterdir()) == []
    finally:
        locked.chmod(0o700)


async def test_not_a_database_is_refused(sqlite_path: Path) -> None:
    sqlite_path.write_bytes(b"this is plainly not SQLite " * 100)
    before = snapshot(sqlite_path)
    with pytest.raises(StoreUnavailable, match="not a database") as info:
        await SQLiteStore(sqlite_path).connect()
    assert str(sqlite_path) in str(info.value)
    assert snapshot(sqlite_path) == before


@pytest.mark.parametrize("value", ["2", "0", "banana"])
async def test_other_protocol_version_is_refused_writing_nothing(
    sqlite_path: Path, value: str
) -> None:
    await make_database(sqlite_path)
    with sqlite3.connect(sqlite_path) as conn:
        conn.execute("update cairnq_meta set value = ? where key = 'protocol_version'", (value,))
        conn.execute("delete from cairnq_migrations where name = '0010_drop_status_index.sql'")
    before = snapshot(sqlite_path)
    with pytest.raises(ProtocolVersionMismatch):
        await SQLiteStore(sqlite_path).connect()
    # Refused before migrating: the missing 0010 was not applied either.
    assert snapshot(sqlite_path) == before
    assert len(query(sqlite_path, "select * from cairnq_migrations")) == len(MIGRATIONS) - 1


async def test_missing_protocol_row_is_refused(sqlite_path: Path) -> None:
    await make_database(sqlite_path)
    with sqlite3.connect(sqlite_path) as conn:
        conn.execute("delete from cairnq_meta where key = 'protocol_version'")
    with pytest.raises(ProtocolVersionMismatch):
        await SQLiteStore(sqlite_path).connect()


async def test_migrate_false(sqlite_path: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty.db"
    sqlite3.connect(empty).close()
    with pytest.raises(StoreUnavailable, match="no cairnq tables"):
        await SQLiteStore(empty, migrate=False).connect()
    assert query(empty, "select name from sqlite_master") == []
    await make_database(sqlite_path)
    store = SQLiteStore(sqlite_path, migrate=False)
    await store.connect()
    assert await store.protocol_version() == 1
    await store.close()


async def test_read_only_refuses_every_write(sqlite_path: Path) -> None:
    writer = SQLiteStore(sqlite_path)
    task = await writer.submit(name="x", key="k")
    await writer.close()
    before = snapshot(sqlite_path)
    store = SQLiteStore(sqlite_path, read_only=True)
    await store.connect()
    try:
        assert store.read_only
        assert await store.get(task.id) == task
        assert (await store.stats())["default"]["queued"] == 1
        error = {"type": "E", "code": "c", "message": "m", "retryable": True, "details": {}}
        writes = [
            store.submit(name="y"),
            store.submit(name="y", key="k2"),
            store.cancel(task.id),
            store.cancel_by_key("k"),
            store.retry(task.id),
            store.retry_by_key("k"),
            store.purge(),
            store.claim(queues=["default"], worker_id="w"),
            store.claim_session(queues=["default"], worker_id="w", names=None, plan=_plan),
            store.heartbeat(task_id=task.id, worker_id="w"),
            store.heartbeat_batch(task_ids=[task.id], worker_id="w"),
            store.progress(task_id=task.id, worker_id="w", progress=0.5),
            store.succeed(task_id=task.id, worker_id="w"),
            store.complete(task_id=task.id, worker_id="w"),
            store.fail(task_id=task.id, worker_id="w", error=error),
        ]
        for write in writes:
            with pytest.raises(StoreUnavailable, match="read-only"):
                await write
    finally:
        await store.close()
    assert snapshot(sqlite_path) == before


async def _plan(draw: Any) -> Any:
    return await draw(None, 1)


async def test_read_only_missing_file_is_refused(sqlite_path: Path) -> None:
    with pytest.raises(StoreUnavailable, match="no such file"):
        await SQLiteStore(sqlite_path, read_only=True).connect()
    assert not sqlite_path.exists()


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"conflict": "overwrite", "key": "k"}, ValueError),
        ({"max_attempts": 0}, ValueError),
        ({"max_attempts": True}, ValueError),
        ({"delay_ms": -1}, ValueError),
        ({"payload": {"x": float("nan")}}, SerializationError),
        ({"payload": [float("inf")]}, SerializationError),
        ({"payload": {"when": __import__("datetime").date(2026, 1, 1)}}, SerializationError),
        ({"payload": {1, 2}}, SerializationError),
        ({"payload": b"bytes"}, SerializationError),
        ({"metadata": {"x": float("-inf")}}, SerializationError),
        ({"name": ""}, ValueError),
    ],
)
async def test_bad_submit_writes_nothing(
    sqlite_path: Path, kwargs: dict[str, Any], error: type[Exception]
) -> None:
    store = SQLiteStore(sqlite_path)
    await store.connect()
    try:
        args = {"name": "x", **kwargs}
        with pytest.raises(error):
            await store.submit(**args)
        assert query(sqlite_path, "select count(*) from cairnq_tasks") == [(0,)]
        assert query(sqlite_path, "select count(*) from cairnq_task_keys") == [(0,)]
    finally:
        await store.close()


async def test_bad_reads_and_writes_raise_before_io(sqlite_path: Path) -> None:
    store = SQLiteStore(sqlite_path)
    task = await store.submit(name="x")
    try:
        bad_calls = [
            store.list(status="paused"),
            store.list(limit=-1),
            store.list(offset=-1),
            store.purge(status="queued"),
            store.purge(status="unknown"),
            store.purge(limit=0),
            store.purge(older_than_ms=-1),
            store.queue_depth("default", -1),
            store.claim(queues=[], worker_id="w"),
            store.claim(queues="default", worker_id="w"),
            store.claim(queues=["default"], worker_id="w", limit=1.5),  # type: ignore[arg-type]
            store.claim(queues=["default"], worker_id="w", lease_ms=0),
            store.fail(task_id=task.id, worker_id="w", error={}, delay_ms=-5),
        ]
        for call in bad_calls:
            with pytest.raises(ValueError):
                await call
        assert [(t.id, t.status) for t in await store.list()] == [(task.id, "queued")]
    finally:
        await store.close()


async def test_bad_constructor_arguments() -> None:
    with pytest.raises(ValueError):
        SQLiteStore(":memory:", busy_timeout_ms=-1)


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://postgres:s3cret@127.0.0.1:5432/test",
        "postgres://localhost/db",
        "sqlite:///tasks.db",
    ],
)
async def test_a_url_as_path_is_refused_creating_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    """A DSN passed to the SQLite side once became ``postgresql:/…/test`` on disk."""
    monkeypatch.chdir(tmp_path)
    from engine import CairnQ, Worker

    for opening in (SQLiteStore, CairnQ.sqlite, Worker.sqlite):
        with pytest.raises(ValueError, match="not the URL") as raised:
            opening(url)
        assert "s3cret" not in str(raised.value)
        assert ("PostgresStore" in str(raised.value)) == url.startswith("postgres")
    assert list(tmp_path.iterdir()) == []


async def test_closed_store_refuses_calls(sqlite_path: Path) -> None:
    store = SQLiteStore(sqlite_path)
    await store.connect()
    await store.close()
    await store.close()  # idempotent
    for call in (store.get("task_x"), store.submit(name="x"), store.connect(), store.stats()):
        with pytest.raises(StoreClosed):
            await call


async def test_statistics_bootstrap_lets_recovery_use_the_lease_index(sqlite_path: Path) -> None:
    store = SQLiteStore(sqlite_path)
    await store.connect()
    for _ in range(50):
        await store.submit(name="x")
    await store.claim(queues=["default"], worker_id="w", limit=10)
    await store.close()
    with sqlite3.connect(sqlite_path) as conn:
        conn.execute("delete from sqlite_stat1")
    await make_database(sqlite_path)  # no statistics row: the open runs ANALYZE
    assert query(sqlite_path, "select count(*) from sqlite_stat1 where tbl = 'cairnq_tasks'")[0][0]
    with sqlite3.connect(sqlite_path) as conn:
        plan = conn.execute(
            "explain query plan " + statement("sqlite", "recover_leases"),
            {"now_ms": 0, "lease_expired_error": "{}"},
        ).fetchall()
    assert any("cairnq_tasks_lease_idx" in row[-1] for row in plan), plan


def test_split_script_cuts_only_at_whole_statements() -> None:
    from engine.store._sqlite_sync import split_script

    script = (
        "-- a header; with a semicolon\n"
        "create table t (x text default ';');\n"
        "create trigger t_ai after insert on t begin\n"
        "  update t set x = 'a;b' where rowid = new.rowid;\n"
        "end;\n"
        "-- a trailing comment\n"
    )
    pieces = split_script(script)
    assert [p.splitlines()[-1] for p in pieces] == [
        "create table t (x text default ';');",
        "end;",
    ]
    assert pieces[0].startswith("-- a header")
    conn = sqlite3.connect(":memory:")
    for piece in pieces:
        conn.execute(piece)
    conn.execute("insert into t default values")
    assert conn.execute("select x from t").fetchall() == [("a;b",)]
    with pytest.raises(ValueError, match="incomplete statement"):
        split_script("select 1;\nselect 2")


# -- the pragmas the engine sets: written out whole, never formatted ---------------------


@pytest.mark.parametrize("synchronous", ["full", "normal"])
def test_durability_pragmas_set_what_their_constants_say(tmp_path: Path, synchronous: str) -> None:
    from engine.store import _sqlite_pragmas as pragmas

    conn = sqlite3.connect(tmp_path / "d.db", isolation_level=None)
    pragmas.set_durability(conn, synchronous)
    assert conn.execute("pragma journal_size_limit").fetchone()[0] == pragmas.WAL_SIZE_LIMIT_BYTES
    assert conn.execute("pragma synchronous").fetchone()[0] == {"full": 2, "normal": 1}[synchronous]
    conn.execute(pragmas.WAIT_FOR_RESTART)
    assert conn.execute("pragma busy_timeout").fetchone()[0] == pragmas._RESTART_WAIT_MS
    conn.close()


@pytest.mark.parametrize("wait_ms", [0, 1, 999, 1_234, 5_000, 2**31 - 1, 10**13])
def test_a_connection_gets_exactly_the_busy_timeout_asked(tmp_path: Path, wait_ms: int) -> None:
    # A busy timeout past SQLite's C int is held at its largest; written into a
    # pragma, 10**13 ms was read back as 0 (no wait at all).
    from engine.store import _sqlite_sync as sync
    from engine.store._sqlite_pragmas import connect_timeout

    conn = sqlite3.connect(tmp_path / "b.db", timeout=connect_timeout(wait_ms))
    assert conn.execute("pragma busy_timeout").fetchone()[0] == min(wait_ms, 2**31 - 1)
    conn.close()
    reader = sync.open_reader(
        str(tmp_path / "b.db"), uri=False, synchronous="full", busy_timeout_ms=wait_ms
    )
    assert reader.execute("pragma busy_timeout").fetchone()[0] == min(wait_ms, 2**31 - 1)
    reader.close()


async def test_the_open_connections_wait_as_long_as_busy_timeout_ms(sqlite_path: Path) -> None:
    store = SQLiteStore(sqlite_path, busy_timeout_ms=1_234)
    await store.connect()
    try:
        await store.submit(name="x")
        # A file's named reads run on the inspect thread's own connection.
        assert await store.read_statement("stats", {"queue": None})
        inspect_reader = store._lanes._readers[False]  # the foreground lane's connection
        assert inspect_reader.execute("pragma busy_timeout").fetchone()[0] == 1_234
        assert store._reader is not None
        assert store._reader.execute("pragma busy_timeout").fetchone()[0] == 0
    finally:
        await store.close()
