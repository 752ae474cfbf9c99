"""What the triage tests share: one database written by cairnq 0.15.1 (the peer)
and read by the engine's Inspector, on SQLite and on Postgres.

The peer creates the database, submits, claims and fails tasks through its own
store; the engine opens the same database and reads. ``sql`` reaches the tables
on a connection of its own, to check answers against the rows and to age rows
(what time would do).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from store_support import DIALECTS as DIALECTS
from store_support import Database

from engine import PostgresStore, SQLiteStore, TaskStore
from engine.inspection import Inspector

cairnq = pytest.importorskip("cairnq")


@dataclass
class Shared:
    """cairnq's client (``peer``), the engine's store on the same database, its
    Inspector, and a side connection (``db``)."""

    peer: Any
    store: TaskStore
    inspector: Inspector
    db: Database
    location: str
    schema: str | None

    def sql(self, text: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        return self.db.rows(text, params)

    async def submit(self, name: str, **kwargs: Any) -> str:
        task = await self.peer.submit(name, kwargs.pop("payload", {}), **kwargs)
        return str(task.id)

    async def claim(
        self, worker: str = "w1", *, queue: str = "default", lease_ms: int = 60_000
    ) -> Any:
        [task] = await self.peer.store.claim(queues=[queue], worker_id=worker, lease_ms=lease_ms)
        return task

    async def fail(
        self,
        name: str,
        error_type: str,
        message: str,
        *,
        retryable: bool = False,
        max_attempts: int = 1,
        queue: str | None = None,
    ) -> str:
        """Submit ``name`` and fail it at once through the peer (claimed by ``w1``).

        A retryable failure goes back to its queue, due at once; it is kept on a
        queue of its own ("retrying" unless told) so later claims do not take it.
        """
        queue = queue or ("retrying" if retryable else "default")
        task_id = await self.submit(name, queue=queue, max_attempts=max_attempts)
        claimed = await self.claim(queue=queue)
        assert claimed.id == task_id
        error = {
            "type": error_type,
            "code": "handler_error",
            "message": message,
            "retryable": retryable,
            "details": {},
        }
        await self.peer.store.fail(
            task_id=task_id, worker_id="w1", error=error, retryable=retryable
        )
        return task_id

    async def succeed(self, name: str, *, queue: str = "ok") -> str:
        task_id = await self.submit(name, queue=queue)
        claimed = await self.claim(queue=queue)
        assert claimed.id == task_id
        await self.peer.store.complete(task_id=task_id, worker_id="w1", result=None)
        return task_id

    def age(self, task_id: str, ms: int) -> None:
        """Move every time of a task ``ms`` into the past (as if it happened then)."""
        self.sql(
            "update cairnq_tasks set completed_at_ms = completed_at_ms - ?, "
            "updated_at_ms = updated_at_ms - ?, run_at_ms = run_at_ms - ?, "
            "created_at_ms = created_at_ms - ? where id = ?",
            (ms, ms, ms, ms, task_id),
        )


async def open_shared(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Shared]:
    store: TaskStore
    if request.param == "sqlite":
        path = str(tmp_path / "shared.db")
        peer = cairnq.CairnQ.sqlite(path)
        store = SQLiteStore(path)
        db = Database("sqlite", sqlite_path=Path(path))
        location, schema = path, None
    else:
        dsn, schema = request.getfixturevalue("pg_dsn"), request.getfixturevalue("pg_schema")
        peer = cairnq.CairnQ.postgres(dsn, schema=schema, max_size=3)
        store = PostgresStore(dsn, schema=schema, max_size=3)
        db = Database("postgres", dsn=dsn, schema=schema)
        location = dsn
    await peer.connect()  # the peer creates the database
    await store.connect()
    try:
        yield Shared(peer, store, Inspector(store), db, location, schema)
    finally:
        await store.close()
        await peer.close()
