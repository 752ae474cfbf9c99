"""The console on a database cairnq 0.15.1 wrote (SQLite and Postgres): the engine
tests' ``Shared`` helpers (``tests/engine/triage_support.py``) with a console app
opened on the same database."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))

from triage_support import DIALECTS, Shared, open_shared

from cairnq_tui.app import ConsoleApp, Settings
from cairnq_tui.target import make_store, parse_target

__all__ = ["DIALECTS", "Shared", "console_on", "shared_db"]


async def shared_db(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Shared]:
    async for s in open_shared(request, tmp_path):
        yield s


def console_on(shared: Shared, *, read_only: bool = False, **settings: object) -> ConsoleApp:
    """A console (its own store) on the shared database; refreshes only when asked."""
    target = parse_target(shared.location, shared.schema)
    store = make_store(target, read_only=read_only)
    options: dict[str, object] = {"refresh_s": 3600.0, **settings}
    return ConsoleApp(store, Settings(target=target, read_only=read_only, **options))  # type: ignore[arg-type]
