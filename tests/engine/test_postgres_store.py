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
