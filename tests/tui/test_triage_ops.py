"""Operator actions in the Tasks list (issue 22.7): run now and delay by (a
cairnq 0.15.1 claim takes the task made due at once; SQLite and Postgres), copy
id / JSON, export to JSON lines and CSV (capped and counted), and read-only."""

from __future__ import annotations

import csv
import json
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from console_states import demo_app, demo_rows, settle
from textual.widgets import Input
from triage_console_support import DIALECTS, Shared, console_on, shared_db

from cairnq_tui.screens.confirm import ConfirmScreen
from cairnq_tui.screens.prompt import PromptScreen
from cairnq_tui.widgets.tasks_view import TasksView

SIZE = (200, 50)
ROWS, _ = demo_rows()


def view_of(app: Any) -> TasksView:
    view: TasksView = app.screen.query_one(TasksView)
    return view


async def highlight(pilot: Any, task_id: str) -> TasksView:
    view = view_of(pilot.app)
    view.table.move_cursor(row=view.table.row_keys().index(task_id))
    await pilot.pause()
    return view


async def answer_prompt(pilot: Any, text: str) -> None:
    screen = pilot.app.screen
    assert isinstance(screen, PromptScreen)
    screen.query_one(Input).value = text
    await pilot.press("enter")
    await settle(pilot)


@pytest.fixture(params=DIALECTS)
async def shared(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Shared]:
    async for s in shared_db(request, tmp_path):
        yield s


@pytest.mark.peer
async def test_run_now_makes_a_delayed_task_claimable_by_cairnq_at_once(shared: Shared) -> None:
    delayed = await shared.submit("later", delay_ms=3_600_000)
    other = await shared.submit("later", delay_ms=3_600_000)
    app = console_on(shared)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await highlight(pilot, delayed)
        await pilot.press("u")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmScreen)
        assert app.screen.title_text == "Run this task now?"
        await pilot.press("y")
        await settle(pilot)
        # cairnq 0.15.1 claims it at once; the other delayed task stays unclaimable.
        claimed = await shared.peer.store.claim(queues=["default"], worker_id="w9", limit=5)
        assert [t.id for t in claimed] == [delayed]

        await highlight(pilot, other)
        before = (await shared.peer.get(other)).run_at_ms
        await pilot.press("d")
        await settle(pilot)
        await answer_prompt(pilot, "15m")
        assert isinstance(app.screen, ConfirmScreen)
        assert app.screen.title_text == "Delay this task by 15m00s?"
        await pilot.press("y")
        await settle(pilot)
        assert (await shared.peer.get(other)).run_at_ms == before + 900_000
        # The claimed (running) task: refused, nothing written.
        await highlight(pilot, delayed)
        await pilot.press("u")
        await settle(pilot)
        assert not isinstance(app.screen, ConfirmScreen)
        assert (await shared.peer.get(delayed)).status == "running"


async def test_bad_duration_is_refused_and_nothing_written(demo_db: Path) -> None:
    app = demo_app(demo_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await highlight(pilot, ROWS[1]["id"])  # queued, due in 5 minutes
        await pilot.press("d")
        await settle(pilot)
        await answer_prompt(pilot, "soon")
        assert not isinstance(app.screen, ConfirmScreen)
    with sqlite3.connect(demo_db) as conn:
        [(run_at,)] = conn.execute(
            "select run_at_ms from cairnq_tasks where id = ?", (ROWS[1]["id"],)
        )
    assert run_at == ROWS[1]["run_at_ms"]


async def test_run_now_and_delay_are_off_when_read_only(demo_db: Path) -> None:
    app = demo_app(demo_db, read_only=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await highlight(pilot, ROWS[1]["id"])
        await pilot.press("u")
        await pilot.press("d")
        await settle(pilot)
        assert not isinstance(app.screen, (ConfirmScreen, PromptScreen))


async def test_copy_id_and_json(demo_db: Path) -> None:
    app = demo_app(demo_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await highlight(pilot, ROWS[6]["id"])
        await pilot.press("y")
        assert app.clipboard == ROWS[6]["id"]
        await pilot.press("Y")
        await settle(pilot)
        copied = json.loads(app.clipboard)
        assert copied["id"] == ROWS[6]["id"] and copied["error"]["type"] == "CardDeclined"


async def test_export_jsonl_and_csv_of_the_filtered_list(demo_db: Path, tmp_path: Path) -> None:
    from textual.widgets import Select

    app = demo_app(demo_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        view = view_of(app)
        view.query_one("#status-filter", Select).value = "succeeded"
        await settle(pilot)
        await pilot.press("E")
        await settle(pilot)
        await answer_prompt(pilot, str(tmp_path / "ok.jsonl"))
        await pilot.press("E")
        await settle(pilot)
        await answer_prompt(pilot, str(tmp_path / "ok.csv"))
        await pilot.press("E")
        await settle(pilot)
        await answer_prompt(pilot, str(tmp_path / "ok.csv"))  # exists: refused
    succeeded = sorted((r["id"] for r in ROWS if r["status"] == "succeeded"), reverse=True)
    lines = (tmp_path / "ok.jsonl").read_text().splitlines()
    assert [json.loads(line)["id"] for line in lines] == succeeded
    with (tmp_path / "ok.csv").open() as f:
        assert [r["id"] for r in csv.DictReader(f)] == succeeded


async def test_export_stops_at_its_cap_and_says_so(
    demo_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cairnq_tui.widgets import task_ops

    monkeypatch.setattr(task_ops, "EXPORT_CAP", 5)
    monkeypatch.setattr(task_ops, "EXPORT_PAGE", 2)
    app = demo_app(demo_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        written, capped = await task_ops.export_tasks(
            app.inspector, view_of(app).filter, tmp_path / "cap.jsonl"
        )
    assert (written, capped) == (5, True)
    ids = [json.loads(line)["id"] for line in (tmp_path / "cap.jsonl").read_text().splitlines()]
    assert ids == sorted((r["id"] for r in ROWS), reverse=True)[:5]


async def test_sort_keys_and_time_ranges(demo_db: Path) -> None:
    from console_states import MINUTE, NOW
    from textual.widgets import Static

    app = demo_app(demo_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        view = view_of(app)
        await pilot.press("s")  # by due time, newest first
        await settle(pilot)
        by_due = sorted(ROWS, key=lambda r: (r["run_at_ms"], r["id"]), reverse=True)
        assert view.table.row_keys() == [r["id"] for r in by_due]
        info = str(app.screen.query_one("#tasks-info", Static).render())
        assert "by due time, newest first" in info
        await pilot.press("S")  # oldest first
        await settle(pilot)
        assert view.table.row_keys() == [r["id"] for r in reversed(by_due)]
        await pilot.press("s", "s", "s")  # completed, then back to created
        await settle(pilot)
        assert view.filter.sort == "created" and not view.filter.descending
        await pilot.press("S", "t")  # newest first, created in the last 15 minutes
        await settle(pilot)
        recent = sorted(
            (r["id"] for r in ROWS if r["created_at_ms"] >= NOW - 15 * MINUTE), reverse=True
        )
        assert view.table.row_keys() == recent
        assert "last 15m (created)" in str(app.screen.query_one("#tasks-info", Static).render())
        await pilot.press("t", "t", "t")  # 1h, 24h, then the custom prompt
        await settle(pilot)
        await answer_prompt(pilot, "10m..5m")
        between = sorted(
            (r["id"] for r in ROWS if NOW - 10 * MINUTE <= r["created_at_ms"] < NOW - 5 * MINUTE),
            reverse=True,
        )
        assert view.table.row_keys() == between
        await pilot.press("t")
        await settle(pilot)
        await answer_prompt(pilot, "2h..5h")  # start after end: refused, range kept
        assert view.table.row_keys() == between
        assert view.time_range is not None and view.time_range[0] == "from 10m ago to 5m ago"
