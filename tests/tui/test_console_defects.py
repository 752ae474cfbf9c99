"""Defects operators found in the console (issue 13), each pinned by a test on a real
database: SQLite, and Postgres where the defect touches the database."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from console_states import refreshed, settle
from textual.widgets import Input, Select

from cairnq_tui.app import ConsoleApp, Settings
from cairnq_tui.target import make_store, parse_target
from cairnq_tui.widgets.tasks_view import TasksView
from engine import SQLiteStore, TaskStore

SIZE = (160, 50)

MakeApp = Callable[..., ConsoleApp]


@pytest.fixture(params=["sqlite", "postgres"])
async def on_both(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[TaskStore, MakeApp]]:
    """Another process's store on a fresh database with a few tasks, and a console maker."""
    if request.param == "sqlite":
        raw, schema = str(tmp_path / "t.db"), None
        store: TaskStore = SQLiteStore(raw)
    else:
        raw = request.getfixturevalue("pg_dsn")
        schema = request.getfixturevalue("pg_schema")
        from engine import PostgresStore

        store = PostgresStore(raw, schema=schema, max_size=2)
    await store.connect()
    for i in range(4):
        await store.submit(name="job", queue="q1", payload={"i": i}, key=f"k-{i}")

    def make(**settings: Any) -> ConsoleApp:
        target = parse_target(raw, schema)
        options: dict[str, Any] = {"refresh_s": 3600.0, **settings}
        return ConsoleApp(make_store(target, read_only=False), Settings(target=target, **options))

    yield store, make
    await store.close()


def errors_shown(app: ConsoleApp) -> list[str]:
    return [n.message for n in app._notifications if n.severity == "error"]


async def test_an_empty_key_or_payload_search_is_no_filter(
    on_both: tuple[TaskStore, MakeApp],
) -> None:
    store, make = on_both
    ids = sorted((t.id for t in await store.list(limit=100)), reverse=True)
    app = make()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        view = app.screen.query_one(TasksView)
        for kind in ("key", "payload", "id"):
            view.query_one("#search-kind", Select).value = kind
            view.query_one("#search", Input).value = ""
            await refreshed(pilot)
            await refreshed(pilot)  # and the refresh after that still works
            assert view.table.row_keys() == ids, kind
            assert errors_shown(app) == [], kind
        # A key search, then clearing it: back to every task.
        view.query_one("#search-kind", Select).value = "key"
        view.query_one("#search", Input).value = "k-1"
        await refreshed(pilot)
        assert len(view.table.row_keys()) == 1
        view.query_one("#search", Input).value = ""
        await refreshed(pilot)
        assert view.table.row_keys() == ids and errors_shown(app) == []
        bar = app.status_bar()
        assert bar is not None and not bar.state.startswith("error")
