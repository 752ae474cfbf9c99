"""A task whose payload the engine cannot decode (a list nested 1,100 deep, as a
cairnq SDK writes it with a raised recursion limit), among good ones: the detail
shows its raw text with a note, no error toasts, and cancelling it reports success
(issue 20.1), on SQLite and Postgres."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from console_states import settle
from textual.widgets import Static

from cairnq_tui.app import ConsoleApp, Settings
from cairnq_tui.screens.confirm import ConfirmScreen
from cairnq_tui.screens.detail import TaskDetailScreen
from cairnq_tui.target import make_store, parse_target
from cairnq_tui.widgets.json_tree import JsonTree
from engine import SQLiteStore, TaskStore

SIZE = (160, 50)
DEEP = "[" * 1100 + "]" * 1100


@pytest.fixture(params=["sqlite", "postgres"])
async def hostile(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[TaskStore, str, Callable[[], ConsoleApp]]]:
    """Good tasks and one whose payload is nested deeper than the engine reads."""
    if request.param == "sqlite":
        raw, schema = str(tmp_path / "t.db"), None
        store: TaskStore = SQLiteStore(raw)
    else:
        raw = request.getfixturevalue("pg_dsn")
        schema = request.getfixturevalue("pg_schema")
        from engine import PostgresStore

        store = PostgresStore(raw, schema=schema, max_size=2)
    await store.connect()
    for i in range(3):
        await store.submit(name="good", queue="q1", payload={"i": i})
    bad = await store.submit(name="deep", queue="q1", payload={})
    if request.param == "sqlite":
        conn = sqlite3.connect(raw)
        with conn:
            conn.execute("update cairnq_tasks set payload = ? where id = ?", (DEEP, bad.id))
        conn.close()
    else:
        import psycopg

        with psycopg.connect(raw, autocommit=True) as conn:
            conn.execute(
                f'update "{schema}".cairnq_tasks set payload = %s::jsonb where id = %s',
                (DEEP, bad.id),
            )

    def make() -> ConsoleApp:
        target = parse_target(raw, schema)
        return ConsoleApp(make_store(target, read_only=False), Settings(target=target))

    yield store, bad.id, make
    await store.close()


def errors(app: Any) -> list[str]:
    return [n.message for n in app._notifications if n.severity == "error"]


async def test_an_undecodable_payload_shows_raw_and_cancels(
    hostile: tuple[TaskStore, str, Callable[[], ConsoleApp]],
) -> None:
    store, bad_id, make = hostile
    app = make()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.open_task(bad_id)
        await settle(pilot)
        await pilot.pause(1.2)  # the detail redraws every second: no toast a second
        screen = app.screen
        assert isinstance(screen, TaskDetailScreen)
        title = str(screen.query_one("#detail-title", Static).render())
        assert bad_id in title and "Loading" not in title, title
        tree = screen.query_one("#json-payload", JsonTree)
        shown = "\n".join(str(tree.get_node_at_line(i).label) for i in range(tree.last_line + 1))
        assert "cannot be decoded" in shown and "nested deeper than" in shown, shown
        assert "[[[[" in shown and "2,200 chars" in shown, shown
        assert len(shown) < 2_000  # truncated, not the whole text
        assert errors(app) == []

        await pilot.press("c")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        await settle(pilot)
        said = [n.message for n in app._notifications]
        assert any(m.startswith("Canceled 1 task") for m in said), said
        assert errors(app) == []
    after = await store.get_status(bad_id)
    assert after is not None and after.status == "canceled"
