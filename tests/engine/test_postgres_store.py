"""What only the Postgres store has: jsonb's refusal of NUL and transactional completion.

Everything both dialects share is in test_store.py, run on each. Each test
runs in its own throwaway schema.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from engine import LostLease, PostgresStore, SerializationError

W = "worker_A"


@pytest.fixture
def store(pg_store: PostgresStore) -> PostgresStore:
    return pg_store


async def test_jsonb_nul_is_refused_before_writing(store: PostgresStore) -> None:
    with pytest.raises(SerializationError, match="NUL"):
        await store.submit(name="n", payload={"s": "a\x00b"})
    assert await store.list() == []
    # An escaped backslash followed by "u0000" is ordinary text, not a NUL.
    task = await store.submit(name="n", payload={"s": "\\u0000"})
    assert task.payload == {"s": "\\u0000"}


async def test_complete_in_commits_with_callers_write(store: PostgresStore, pg_schema: str) -> None:
    async def make_table(conn: Any) -> None:
        await conn.execute("create table side (v text)")

    await store.submit(name="n")
    (task,) = await store.claim(queues=["default"], worker_id=W)
    await store.complete_in(task_id=task.id, worker_id=W, result=None, write=make_table)

    async def write(conn: Any) -> None:
        await conn.execute("insert into side values ('written')")

    await store.submit(name="n")
    (task,) = await store.claim(queues=["default"], worker_id=W)
    done = await store.succeed_in(task_id=task.id, worker_id=W, result={"ok": 1}, write=write)
    assert done.status == "succeeded" and done.result == {"ok": 1}
    # Lease lost: the caller's write is rolled back with the settle.
    with pytest.raises(LostLease):
        await store.complete_in(task_id=task.id, worker_id=W, write=write)
    with psycopg.connect(store._dsn, autocommit=True) as conn:  # the side table's contents
        rows = conn.execute(f'select v from "{pg_schema}".side').fetchall()
    assert rows == [("written",)]


# -- task rows decoded by position ---------------------------------------------------------------


async def test_task_rows_decode_the_same_by_position_and_by_name(store: PostgresStore) -> None:
    parent = await store.submit(name="p")
    task = await store.submit(
        name="full",
        payload={"deep": [1, 2.5, None, {"k": "v"}]},
        metadata={"m": True},
        priority=-4,
        parent_id=parent.id,
        root_id=parent.id,
        correlation_id="corr",
        delay_ms=5_000,
    )
    assert store._positional  # the protocol's table, as migrated
    got, canceled = await store.get(task.id), await store.cancel(task.id)
    assert got == task
    assert canceled is not None and canceled.status == "canceled"
    store._positional = False  # the fallback: rows by column name
    assert await store.get(task.id) == canceled
    other = await store.cancel(parent.id)
    assert other is not None and other.status == "canceled"
    store._positional = True
    assert await store.get(parent.id) == other


async def test_an_extra_trailing_column_keeps_rows_decoding(
    store: PostgresStore, pg_dsn: str, pg_schema: str
) -> None:
    task = await store.submit(name="x", payload={"a": 1})
    with psycopg.connect(pg_dsn, autocommit=True, options=f"-c search_path={pg_schema}") as conn:
        conn.execute("alter table cairnq_tasks add column extra_note text default 'n'")
    other = PostgresStore(pg_dsn, schema=pg_schema, max_size=2)
    await other.connect()
    try:
        assert other._positional
        assert await other.get(task.id) == await store.get(task.id)
        assert (await other.cancel(task.id)).status == "canceled"  # type: ignore[union-attr]
    finally:
        await other.close()
