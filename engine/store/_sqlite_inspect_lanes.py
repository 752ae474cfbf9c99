"""Introspection reads on SQLite, off the caller's loop.

``read_statement`` scans pages of thousands of rows, so it runs on a thread of
its own with a connection of its own: a console sharing the loop never freezes
for it, and writers never wait on it. A background read (a recorder's sample)
has a second lane, thread and connection, so it never queues ahead of a view's.
"""

from __future__ import annotations

import asyncio
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from engine.store import _sqlite_sync as sync


class InspectLanes:
    """Two lanes (foreground, background), each a thread and a connection opened on first use."""

    def __init__(self, *, synchronous: str, busy_timeout_ms: int) -> None:
        self._synchronous = synchronous
        self._busy_timeout_ms = busy_timeout_ms
        self._threads: dict[bool, ThreadPoolExecutor] = {}
        self._readers: dict[bool, sqlite3.Connection] = {}
        #: ``(location, uri)`` of the database once opened; None: no lanes (in-memory).
        self.at: tuple[str, bool] | None = None

    async def read(
        self, sql: str, params: dict[str, Any], *, background: bool
    ) -> list[dict[str, Any]]:
        """Rows as dicts, read on the lane's thread."""
        lane = bool(background)
        thread = self._threads.get(lane)
        if thread is None:
            prefix = "cairnq-inspect-background" if lane else "cairnq-inspect"
            thread = ThreadPoolExecutor(1, thread_name_prefix=prefix)
            self._threads[lane] = thread
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(thread, self._read, sql, params, lane)

    def _read(self, sql: str, params: dict[str, Any], lane: bool) -> list[dict[str, Any]]:
        reader = self._readers.get(lane)
        if reader is None:
            assert self.at is not None
            location, uri = self.at
            # Off the loop a read may wait out a checkpoint or WAL recovery.
            reader = sync.open_reader(
                location,
                uri=uri,
                synchronous=self._synchronous,
                busy_timeout_ms=self._busy_timeout_ms,
            )
            self._readers[lane] = reader
        cursor = reader.execute(sql, params)
        rows = cursor.fetchall()
        names = [d[0] for d in cursor.description or ()]
        return [dict(zip(names, row, strict=True)) for row in rows]

    def _close_reader(self, lane: bool) -> None:
        reader = self._readers.pop(lane, None)
        if reader is not None:
            reader.close()

    async def close(self) -> None:
        """Close each lane's connection on its own thread, then the threads."""
        loop = asyncio.get_running_loop()
        for lane, thread in list(self._threads.items()):
            await loop.run_in_executor(thread, self._close_reader, lane)
            thread.shutdown(wait=False)
        self._threads.clear()
