"""Errors in the Tasks list and the "error text" search (issue 22.1, 22.2): on the
demo database, and on databases cairnq 0.15.1 filled, SQLite and Postgres."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from console_states import demo_app, demo_rows, refreshed, settle
from textual.widgets import Input, Select, Static
from triage_console_support import DIALECTS, Shared, console_on, shared_db

from cairnq_tui.widgets.tasks_view import TasksView

SIZE = (200, 50)
ROWS, _KEYS = demo_rows()


def view_of(app: Any) -> TasksView:
    view: TasksView = app.screen.query_one(TasksView)
    return view


def cells(view: TasksView, task_id: str) -> dict[str, str]:
    return {
        column: str(cell)
        for column, cell in zip(view.columns, view.table.get_row(task_id), strict=True)
    }


def info(app: Any) -> str:
    return str(app.screen.query_one("#tasks-info", Static).render())


async def search_errors(pilot: Any, view: TasksView, text: str) -> None:
    view.query_one("#search-kind", Select).value = "error"
    view.query_one("#search", Input).value = text
    await refreshed(pilot)


async def test_failed_and_retrying_rows_show_their_error(demo_db: Path) -> None:
    app = demo_app(demo_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        view = view_of(app)
        failed, retrying, done = ROWS[6]["id"], ROWS[10]["id"], ROWS[5]["id"]
        assert cells(view, failed)["error"] == "CardDeclined: card ending 4242 was declined"
        assert cells(view, retrying)["error"] == "CardDeclined: gateway timeout"
        assert cells(view, done)["error"] == ""


async def test_error_search_lists_newest_failure_first_with_its_window(demo_db: Path) -> None:
    app = demo_app(demo_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        view = view_of(app)
        await search_errors(pilot, view, "DECLINED")
        # Both the failed task and the one retrying after an error match the type,
        # the newest failure first (failed 3 min ago; the retry's error 10 min ago).
        assert view.table.row_keys() == [ROWS[6]["id"], ROWS[10]["id"]]
        assert "2 error matches" in info(app)
        assert "searched the 1 failure" in info(app)  # (failed rows: the window)
        await search_errors(pilot, view, "gateway")
        assert view.table.row_keys() == [ROWS[10]["id"]]
        await search_errors(pilot, view, "no such error anywhere")
        assert view.table.row_keys() == []
        assert "0 error matches" in info(app)


@pytest.fixture(params=DIALECTS)
async def shared(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Shared]:
    async for s in shared_db(request, tmp_path):
        yield s


@pytest.mark.peer
async def test_errors_written_by_cairnq_are_listed_and_searched(shared: Shared) -> None:
    failed = await shared.fail("charge", "KeyError", "order 42 not found\n  at line 3")
    retrying = await shared.fail(
        "charge", "TimeoutError", "gave up after 30 s", retryable=True, max_attempts=3
    )
    other = await shared.fail("ship", "OSError", "[bold]disk[/bold] full\x1b[31m")
    done = await shared.succeed("charge")
    app = console_on(shared)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        view = view_of(app)
        assert cells(view, failed)["error"] == "KeyError: order 42 not found"
        assert cells(view, retrying)["error"] == "TimeoutError: gave up after 30 s"
        assert cells(view, other)["error"] == "OSError: [bold]disk[/bold] full\\x1b[31m"
        assert cells(view, done)["error"] == ""

        await search_errors(pilot, view, "timeout")
        assert view.table.row_keys() == [retrying]
        await search_errors(pilot, view, "error")
        assert set(view.table.row_keys()) == {failed, retrying, other}
        assert view.table.row_keys()[0] == other  # newest failure first
        assert "searched all 2 failures" in info(app)  # failed rows only
