"""Shared pieces of the hosting tests: a user module written to disk, a store per
dialect, and a host on it, all torn down afterwards.
"""

from __future__ import annotations

import asyncio
import sys
import textwrap
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import ModuleType

import pytest

from cairnq_tui.hosting import HostedStatus, WorkerHost
from engine import PostgresStore, SQLiteStore, TaskStore

DIALECTS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], TaskStore]:
    """New, unconnected stores on one fresh database of the requested dialect."""
    if request.param == "sqlite":
        path = tmp_path / "tasks.db"
        return lambda: SQLiteStore(path)
    dsn = request.getfixturevalue("pg_dsn")
    schema = request.getfixturevalue("pg_schema")
    return lambda: PostgresStore(dsn, schema=schema, max_size=4)


class UserModules:
    """Writes modules into a folder on ``sys.path`` under unique names, and forgets them."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.names: list[str] = []
        sys.path.insert(0, str(folder))

    def write(self, source: str, name: str | None = None) -> str:
        name = name or f"user_{uuid.uuid4().hex[:10]}"
        (self.folder / f"{name}.py").write_text(textwrap.dedent(source))
        if name not in self.names:
            self.names.append(name)
        return name

    def module(self, name: str) -> ModuleType:
        return sys.modules[name]

    def close(self) -> None:
        for name in self.names:
            sys.modules.pop(name, None)
        sys.path.remove(str(self.folder))


async def eventually(
    check: Callable[[], Awaitable[bool]], *, timeout_s: float = 10.0, what: str = "condition"
) -> None:
    """Poll ``check`` until it holds; fail after a generous deadline."""
    deadline = time.monotonic() + timeout_s
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


async def status_of(host: WorkerHost) -> HostedStatus:
    return (await host.statuses())[0]


async def wait_state(host: WorkerHost, *states: str) -> HostedStatus:
    async def reached() -> bool:
        return (await status_of(host)).state in states

    await eventually(reached, what=f"state in {states}")
    return await status_of(host)
