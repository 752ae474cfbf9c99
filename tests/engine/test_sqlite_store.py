"""What only the SQLite store has: in-memory databases and file paths as identities.

Everything both dialects share is in test_store.py, run on each.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from engine import SQLiteStore, StoreClosed


async def test_memory_handles_are_separate_and_final() -> None:
    a, b = SQLiteStore(":memory:"), SQLiteStore(":memory:")
    await a.connect()
    await b.connect()
    task = await a.submit(name="x")
    assert await a.get(task.id) == task
    assert await b.get(task.id) is None
    assert a.signals is not b.signals
    await a.close()
    await b.close()
    with pytest.raises(StoreClosed):
        await a.get(task.id)
    with pytest.raises(StoreClosed):
        await a.connect()


async def test_one_file_named_two_ways_is_one_database(sqlite_path: Path) -> None:
    a, b = SQLiteStore(sqlite_path), SQLiteStore(str(sqlite_path))
    await a.connect()
    await b.connect()
    try:
        assert a.signals is b.signals
        woke = asyncio.ensure_future(b.claim_wake(["default"], 5_000))
        await asyncio.sleep(0)
        task = await a.submit(name="x")
        assert await woke is True
        assert await b.get(task.id) == task
    finally:
        await a.close()
        await b.close()


async def test_read_statement_rows_carry_the_statements_column_names(sqlite_path: Path) -> None:
    store = SQLiteStore(sqlite_path)
    try:
        await store.submit(name="x")
        stats = await store.read_statement("stats", {"queue": None})
        assert stats == [{"queue": "default", "status": "queued", "n": 1}]
    finally:
        await store.close()
