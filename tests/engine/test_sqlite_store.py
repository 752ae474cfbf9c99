"""What only the SQLite store has: in-memory databases, its statements' column names.

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


async def test_read_statement_rows_carry_the_statements_column_names(sqlite_path: Path) -> None:
    store = SQLiteStore(sqlite_path)
    try:
        await store.submit(name="x")
        stats = await store.read_statement("stats", {"queue": None})
        assert stats == [{"queue": "default", "status": "queued", "n": 1}]
    finally:
        await store.close()


async def test_gathered_submits_keep_nul_characters_in_their_text(sqlite_path: Path) -> None:
    # A gather's submits are written by one insert_tasks, its rows carried as
    # JSON; SQLite stores NUL characters in text, and JSON must not cut them.
    store = SQLiteStore(sqlite_path)
    try:
        tasks = await asyncio.gather(
            *(
                store.submit(
                    name=f"n\x00{i}", queue="q\x00", correlation_id=f"c\x00{i}", payload={"i": i}
                )
                for i in range(8)
            ),
            *(store.submit(name=f"plain {i}", payload={"i": i}) for i in range(8)),
        )
        for task in tasks:
            stored = await store.get(task.id)
            assert stored == task
        assert [t.name for t in tasks[:8]] == [f"n\x00{i}" for i in range(8)]
    finally:
        await store.close()
