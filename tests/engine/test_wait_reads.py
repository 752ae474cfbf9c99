"""A wait reads the full row only when it can end the wait.

Another process (a real child Python) heartbeats a task many times, then
completes the one being waited on, whose payload is 400 KB. On SQLite each of
those commits wakes the waiter (a commit anywhere in the file); on Postgres
nothing but the task's own "done" does. Either way the waiter's full-row reads,
counted by a store of our own that counts the reads it runs, stay at the one
that ends the wait: the other wakes cost a status look.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from store_support import DIALECTS

from engine import CairnQ, PostgresStore, SQLiteStore, Task, TaskRef, TaskStore

BEATS = 40
BIG = {"blob": "x" * 400_000}

_CHILD = """
import asyncio, sys
from engine import PostgresStore, SQLiteStore

async def main() -> None:
    dialect, where, schema, beats = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    if dialect == "sqlite":
        store = SQLiteStore(where)
    else:
        store = PostgresStore(where, schema=schema, max_size=2)
    await store.connect()
    tasks = await store.claim(queues=["default"], worker_id="child", limit=2)
    busy = next(t for t in tasks if t.name == "busy")
    waited = next(t for t in tasks if t.name == "waited")
    print("claimed", flush=True)
    sys.stdin.readline()
    for _ in range(beats):
        await store.heartbeat(task_id=busy.id, worker_id="child", lease_ms=60_000)
        await asyncio.sleep(0.02)
    await store.complete(task_id=waited.id, worker_id="child", result={"ok": True})
    print("completed", flush=True)
    await store.close()

asyncio.run(main())
"""


class Counting:
    """Counts the full-row and status reads a store runs (ours, around its own methods)."""

    def __init__(self) -> None:
        self.rows = 0
        self.looks = 0


def counting(store: TaskStore, counts: Counting) -> TaskStore:
    kind: Any = type(store)

    class CountingStore(kind):  # type: ignore[misc, valid-type]
        async def _get(self, task_id: str) -> Task | None:
            counts.rows += 1
            got: Task | None = await super()._get(task_id)
            return got

        async def _get_by_key(self, key: str) -> Task | None:
            counts.rows += 1
            got: Task | None = await super()._get_by_key(key)
            return got

        async def _get_status(self, task_id: str) -> TaskRef | None:
            counts.looks += 1
            ref: TaskRef | None = await super()._get_status(task_id)
            return ref

        async def _get_status_by_key(self, key: str) -> TaskRef | None:
            counts.looks += 1
            ref: TaskRef | None = await super()._get_status_by_key(key)
            return ref

    store.__class__ = CountingStore
    return store


@pytest.fixture(params=DIALECTS)
async def setup(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[TaskStore, list[str]]]:
    store: TaskStore
    if request.param == "sqlite":
        path = str(tmp_path / "tasks.db")
        store = SQLiteStore(path)
        args = ["sqlite", path, "-"]
    else:
        dsn, schema = request.getfixturevalue("pg_dsn"), request.getfixturevalue("pg_schema")
        store = PostgresStore(dsn, schema=schema, max_size=4)
        args = ["postgres", dsn, schema]
    await store.connect()
    try:
        yield store, args
    finally:
        await store.close()


@pytest.mark.parametrize("by_key", [False, True])
async def test_heartbeats_elsewhere_cost_status_looks_not_rows(
    setup: tuple[TaskStore, list[str]], by_key: bool
) -> None:
    store, args = setup
    await store.submit(name="busy")
    waited = await store.submit(name="waited", payload=BIG, key="the-key")
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _CHILD,
        *args,
        str(BEATS),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert child.stdin is not None and child.stdout is not None
    try:
        assert (await asyncio.wait_for(child.stdout.readline(), 60)).strip() == b"claimed"
        counts = Counting()
        client = CairnQ(counting(store, counts))
        # Polls far apart: every beat of this wait is a wake.
        waiting = asyncio.ensure_future(
            client.wait_by_key("the-key", timeout_ms=120_000, poll_ms=60_000, max_poll_ms=60_000)
            if by_key
            else client.wait(waited.id, timeout_ms=120_000, poll_ms=60_000, max_poll_ms=60_000)
        )
        await asyncio.sleep(0.2)  # the wait is asleep before the heartbeats begin
        child.stdin.write(b"go\n")
        assert (await asyncio.wait_for(child.stdout.readline(), 60)).strip() == b"completed"
        done = await asyncio.wait_for(waiting, 60)
    finally:
        child.stdin.close()
        await asyncio.wait_for(child.wait(), 30)
    assert (done.id, done.status, done.payload) == (waited.id, "succeeded", BIG)
    assert counts.rows == 1, vars(counts)
    if args[0] == "sqlite":
        assert counts.looks >= 5, vars(counts)  # the heartbeats did wake it
