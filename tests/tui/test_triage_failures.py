"""The Failures view (issue 22.3): groups over a window, a group's tasks, group
retry and cancel through the confirmed controls, on SQLite and Postgres, with
failures written by cairnq 0.15.1."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from console_states import demo_app, settle
from textual.widgets import Static
from triage_console_support import DIALECTS, Shared, console_on, shared_db
from triage_states import build_triage_db

from cairnq_tui.formatting import short_id
from cairnq_tui.panels import open_panel
from cairnq_tui.screens.confirm import ConfirmScreen
from cairnq_tui.screens.panel import PanelScreen
from cairnq_tui.widgets.failure_group_view import FailureGroupView
from cairnq_tui.widgets.failures_view import FailuresView

SIZE = (200, 50)
TIMEOUTS = "charge_card\x00TimeoutError\x00order <n> timed out"


@pytest.fixture
def triage_db(tmp_path: Path) -> Path:
    return build_triage_db(tmp_path / "triage.db")


def failures(app: Any) -> FailuresView:
    view: FailuresView = app.screen.query_one(FailuresView)
    return view


def counts(view: FailuresView) -> dict[str, int]:
    return {k: int(str(view.table.get_row(k)[0]).replace(",", "")) for k in view.table.row_keys()}


async def open_failures(pilot: Any) -> FailuresView:
    await settle(pilot)
    open_panel(pilot.app, "Failures")
    await settle(pilot)
    return failures(pilot.app)


async def test_palette_opens_failures_and_w_cycles_the_window(triage_db: Path) -> None:
    app = demo_app(triage_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"Failures")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, PanelScreen)
        view = failures(app)
        assert view.window == "24h"
        assert counts(view) == {
            TIMEOUTS: 14,
            "send_welcome\x00SMTPRecipientsRefused\x00"
            "<n> mailbox user<n>@example.com unavailable (ref <hex>)": 6,
            "charge_card\x00CardDeclined\x00card ending <n> was declined": 1,
        }
        assert view.table.row_keys()[0] == TIMEOUTS  # most failures first
        info = str(app.screen.query_one("#failures-info", Static).render())
        assert "3 group(s), 21 failure(s) · grouped 21 failures" in info
        await pilot.press("w")  # 7 d: the old KeyError appears
        await settle(pilot)
        assert view.window == "7d"
        assert counts(view)["build_report\x00KeyError\x00'quarter'"] == 1
        await pilot.press("w")  # everything kept
        await settle(pilot)
        assert view.window == "all" and len(counts(view)) == 4
        await pilot.press("w")  # 1 h: the bounces are older
        await settle(pilot)
        assert view.window == "1h"
        assert set(counts(view)) == {
            TIMEOUTS,
            "charge_card\x00CardDeclined\x00card ending <n> was declined",
        }
        await pilot.press("escape")
        await settle(pilot)
        assert not isinstance(app.screen, PanelScreen)


async def test_enter_lists_the_group_and_r_retries_it_with_the_exact_count(
    triage_db: Path,
) -> None:
    app = demo_app(triage_db)
    async with app.run_test(size=SIZE) as pilot:
        view = await open_failures(pilot)
        view.table.move_cursor(row=view.table.row_keys().index(TIMEOUTS))
        await pilot.press("enter")
        await settle(pilot)
        group = app.screen.query_one(FailureGroupView)
        assert len(group.table.row_keys()) == 14
        first = group.table.get_row(group.table.row_keys()[0])
        assert str(first[-1]) == "TimeoutError: order 4000 timed out"  # unmasked, newest first
        assert "14 failed task(s) in the last 24h" in str(
            app.screen.query_one("#group-info", Static).render()
        )
        await pilot.press("r")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmScreen)
        assert app.screen.title_text == "Retry 14 tasks?"
        await pilot.press("y")
        await settle(pilot)
    with sqlite3.connect(triage_db) as conn:
        statuses = conn.execute(
            "select status, count(*) from cairnq_tasks where name = 'charge_card' "
            "and json_extract(error, '$.type') is null and attempt = 3 group by status"
        ).fetchall()
        left = conn.execute(
            "select count(*) from cairnq_tasks where status = 'failed' and name = 'charge_card'"
        ).fetchone()[0]
    assert left == 1  # only the CardDeclined one is still failed
    assert ("queued", 14) in statuses  # the retried tasks: error cleared, queued


async def test_group_controls_are_off_in_a_read_only_session(triage_db: Path) -> None:
    app = demo_app(triage_db, read_only=True)
    async with app.run_test(size=SIZE) as pilot:
        view = await open_failures(pilot)
        view.table.move_cursor(row=view.table.row_keys().index(TIMEOUTS))
        await pilot.press("r")
        await pilot.press("c")
        await pilot.press("p")
        await settle(pilot)
        assert isinstance(app.screen, PanelScreen)  # no confirmation opened
    with sqlite3.connect(triage_db) as conn:
        assert (
            conn.execute("select count(*) from cairnq_tasks where status = 'failed'").fetchone()[0]
            == 22
        )


@pytest.fixture(params=DIALECTS)
async def shared(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Shared]:
    async for s in shared_db(request, tmp_path):
        yield s


@pytest.mark.peer
async def test_failures_written_by_cairnq_group_and_retry(shared: Shared) -> None:
    lost = [await shared.fail("charge", "KeyError", f"order {n} not found") for n in (7, 42, 99)]
    other = await shared.fail("ship", "OSError", "disk full")
    await shared.succeed("charge")
    app = console_on(shared)
    async with app.run_test(size=SIZE) as pilot:
        view = await open_failures(pilot)
        key = "charge\x00KeyError\x00order <n> not found"
        assert counts(view) == {key: 3, "ship\x00OSError\x00disk full": 1}
        row = view.table.get_row(key)
        assert view.highlighted() is not None
        group = next(g for g in view.groups.groups if g.name == "charge")  # type: ignore[union-attr]
        assert group.example_id == lost[-1]  # the example is the newest failure
        assert str(row[-2]) == short_id(lost[-1])
        view.table.move_cursor(row=view.table.row_keys().index(key))
        await pilot.press("r")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmScreen)
        assert app.screen.title_text == "Retry 3 tasks?"
        await pilot.press("y")
        await settle(pilot)
        for task_id in lost:
            task = await shared.peer.get(task_id)
            assert task is not None and task.status == "queued"
        task = await shared.peer.get(other)
        assert task is not None and task.status == "failed"
        assert counts(failures(app)) == {"ship\x00OSError\x00disk full": 1}


@pytest.mark.peer
async def test_p_purges_a_group_written_by_cairnq_and_nothing_else(shared: Shared) -> None:
    lost = [await shared.fail("charge", "KeyError", f"order {n} not found") for n in (7, 42, 99)]
    other = await shared.fail("ship", "OSError", "disk full")
    done = await shared.succeed("charge")
    app = console_on(shared)
    async with app.run_test(size=SIZE) as pilot:
        view = await open_failures(pilot)
        key = "charge\x00KeyError\x00order <n> not found"
        view.table.move_cursor(row=view.table.row_keys().index(key))
        await pilot.press("p")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmScreen)
        assert app.screen.title_text == "Purge 3 task(s)?"
        await pilot.press("y")
        await settle(pilot)
        for task_id in lost:
            assert await shared.peer.get(task_id) is None
        for task_id in (other, done):
            assert await shared.peer.get(task_id) is not None
        assert counts(failures(app)) == {"ship\x00OSError\x00disk full": 1}
