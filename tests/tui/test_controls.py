"""Pilot tests of every control: the confirmation shows what will change, and only
confirming writes (checked in the database through a separate store handle)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from console_states import demo_app, demo_rows, fill_submit, refreshed, settle
from textual.widgets import Button, Checkbox, Input, Static, TextArea

from cairnq_tui.screens.confirm import ConfirmScreen
from cairnq_tui.screens.detail import TaskDetailScreen
from cairnq_tui.screens.purge import PurgeScreen
from cairnq_tui.screens.submit import SubmitScreen
from cairnq_tui.widgets.keys_view import KeysView
from cairnq_tui.widgets.tasks_view import TasksView
from engine import SQLiteStore, StoreUnavailable

SIZE = (160, 50)
ROWS, KEYS = demo_rows()


def tid(i: int) -> str:
    return str(ROWS[i]["id"])


@pytest.fixture
async def db(demo_db: Path) -> AsyncIterator[SQLiteStore]:
    """A second handle on the demo database: what another process would see."""
    store = SQLiteStore(demo_db)
    await store.connect()
    yield store
    await store.close()


def notes(app: Any) -> list[str]:
    # Toasts have no public reader; the app keeps them in _notifications.
    return [n.message for n in app._notifications]


async def on_row(pilot: Any, task_id: str) -> TasksView:
    view = pilot.app.screen.query_one(TasksView)
    view.table.move_cursor(row=view.table.row_keys().index(task_id))
    await pilot.pause()
    return view


async def confirm(pilot: Any, *, expect: str = "") -> str:
    """Check the confirmation dialog mentions ``expect``, confirm it, wait for the write."""
    screen = pilot.app.screen
    assert isinstance(screen, ConfirmScreen), screen
    body = str(screen.query_one(".dialog-body", Static).render())
    assert expect in body, body
    await pilot.press("y")
    await settle(pilot)
    return body


async def test_cancel_one_and_a_selection(demo_db: Path, db: SQLiteStore) -> None:
    app = demo_app(demo_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await on_row(pilot, tid(0))
        await pilot.press("c")
        await pilot.pause()
        await pilot.press("escape")  # dismissed: nothing written
        await settle(pilot)
        assert (await db.get(tid(0))).status == "queued"  # type: ignore[union-attr]
        await pilot.press("c")
        await confirm(pilot, expect="queued → canceled")
        assert (await db.get(tid(0))).status == "canceled"  # type: ignore[union-attr]

        await refreshed(pilot)
        await on_row(pilot, tid(1))
        await pilot.press("space")
        await on_row(pilot, tid(2))
        await pilot.press("space", "c")
        await pilot.pause()
        body = await confirm(pilot, expect="running → cancel requested")
        assert "it stops when its handler checks ctx.canceled()" in body
        assert (await db.get(tid(1))).status == "canceled"  # type: ignore[union-attr]
        running = await db.get(tid(2))
        assert running is not None and running.status == "running" and running.cancel_requested
        # A running task only gets a request: the confirmation and the report say so.
        said = next(n for n in reversed(notes(app)) if n.startswith("Canceled 1 task"))
        assert "requested the cancel of 1 running task" in said
        assert "ctx.canceled()" in said
        # The selection does not outlive its action, and the report says it was cleared.
        view = app.screen.query_one(TasksView)
        assert "the selection was cleared" in said and view.selected == set()
        assert "selected" not in str(view.query_one("#tasks-info", Static).render())
        await on_row(pilot, tid(3))
        await pilot.press("c")  # a second c acts on the highlighted row only
        await pilot.pause()
        body = str(app.screen.query_one(".dialog-body", Static).render())
        assert tid(3) in body and tid(1) not in body and tid(2) not in body, body
        await pilot.press("escape")


async def test_cancel_everything_matching_the_filter(demo_db: Path, db: SQLiteStore) -> None:
    app = demo_app(demo_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        view = pilot.app.screen.query_one(TasksView)
        view.query_one("#queue-filter").value = "emails"  # type: ignore[attr-defined]
        await refreshed(pilot)
        await pilot.press("C")
        await settle(pilot)
        live = [
            r["id"] for r in ROWS if r["queue"] == "emails" and r["status"] in ("queued", "running")
        ]
        await confirm(
            pilot, expect=f"{len(live)} live (queued or running) tasks matching queue='emails'"
        )
        for task_id in live:
            task = await db.get(task_id)
            assert task is not None and (task.status == "canceled" or task.cancel_requested)
        assert (await db.get(tid(4))).cancel_requested  # type: ignore[union-attr] # reports, untouched before
        assert (await db.get(tid(3))).cancel_requested is False  # type: ignore[union-attr]


async def test_retry_with_reset_and_retry_matching(demo_db: Path, db: SQLiteStore) -> None:
    app = demo_app(demo_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await on_row(pilot, tid(0))
        await pilot.press("r")  # a queued task: refused with a notice, no dialog
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmScreen)
        await on_row(pilot, tid(6))
        await pilot.press("r")
        await pilot.pause()
        app.screen.query_one("#reset", Checkbox).value = True
        await confirm(pilot, expect="failed → queued (attempt 3/3)")
        task = await db.get(tid(6))
        assert task is not None and task.status == "queued" and task.attempt == 0
        assert task.error is None

        await refreshed(pilot)
        await pilot.press("R")
        await settle(pilot)
        await confirm(pilot, expect="1 failed or canceled tasks")
        task = await db.get(tid(7))
        assert task is not None and task.status == "queued" and task.attempt == 0


async def test_cancel_and_retry_by_key(demo_db: Path, db: SQLiteStore) -> None:
    app = demo_app(demo_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("4")
        await settle(pilot)
        keys = app.screen.query_one(KeysView)
        keys.table.move_cursor(row=keys.table.row_keys().index("signup-ada"))
        await pilot.press("c")
        await settle(pilot)
        await confirm(pilot, expect=f"key 'signup-ada' → {KEYS['signup-ada']}")
        assert (await db.get_by_key("signup-ada")).status == "canceled"  # type: ignore[union-attr]
        keys.table.move_cursor(row=keys.table.row_keys().index("invoice-1002"))
        await pilot.press("r")
        await settle(pilot)
        await confirm(pilot, expect="failed → queued")
        assert (await db.get_by_key("invoice-1002")).status == "queued"  # type: ignore[union-attr]


async def test_submit_validates_then_reports_new_reused_rejected(
    demo_db: Path, db: SQLiteStore
) -> None:
    app = demo_app(demo_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("n")
        await pilot.pause()
        screen = await fill_submit(pilot, name="send_welcome", payload='{"user": ')
        assert screen.query_one("#submit", Button).disabled
        assert "invalid JSON" in str(screen.query_one("#payload-error", Static).render())
        screen = await fill_submit(pilot, name="send_welcome", payload='{"score": NaN}')
        assert screen.query_one("#submit", Button).disabled
        assert "NaN" in str(screen.query_one("#payload-error", Static).render())
        await pilot.press("ctrl+s")  # refused while invalid: the dialog stays
        assert isinstance(app.screen, SubmitScreen)
        await fill_submit(pilot, name="send_welcome", payload='{"user": "lin"}', key="signup-lin")
        await pilot.press("ctrl+s")
        await pilot.pause()
        await confirm(pilot, expect="key 'signup-lin', conflict 'reuse'")
        created = await db.get_by_key("signup-lin")
        assert created is not None and created.payload == {"user": "lin"}
        assert any(f"Submitted new task {created.id}" in n for n in notes(app))
        assert isinstance(app.screen, TaskDetailScreen)
        await pilot.press("escape")

        await pilot.press("n")
        await pilot.pause()
        await fill_submit(pilot, name="send_welcome", payload="{}", key="signup-lin")
        await pilot.press("ctrl+s")
        await pilot.pause()
        await confirm(pilot)
        assert any(f"Reused the existing task {created.id} (queued)" in n for n in notes(app))
        await pilot.press("escape")

        await pilot.press("n")
        await pilot.pause()
        await fill_submit(pilot, name="x", payload="{}", key="invoice-1001", conflict="reject")
        await pilot.press("ctrl+s")
        await pilot.pause()
        await confirm(pilot)
        assert any("Rejected" in n and "AlreadyExists" in n for n in notes(app))
        # Messages quote keys and names from the database: never read as markup.
        assert all(not n.markup for n in app._notifications)
        assert (await db.get_by_key("invoice-1001")).id == KEYS["invoice-1001"]  # type: ignore[union-attr]


async def test_replace_prefills_and_follows_the_key(demo_db: Path, db: SQLiteStore) -> None:
    app = demo_app(demo_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("4")
        await settle(pilot)
        keys = app.screen.query_one(KeysView)
        keys.table.move_cursor(row=keys.table.row_keys().index("signup-ada"))
        await pilot.press("e")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, SubmitScreen)
        assert '"user": "ada"' in screen.query_one("#payload", TextArea).text
        screen.query_one("#payload", TextArea).text = '{"user": "ada", "lang": "fr"}'
        await pilot.press("ctrl+s")
        await pilot.pause()
        await confirm(pilot, expect=f"{KEYS['signup-ada']} (queued) is canceled if still live")
        new = await db.get_by_key("signup-ada")
        assert new is not None and new.id != KEYS["signup-ada"] and new.payload["lang"] == "fr"
        assert (await db.get(KEYS["signup-ada"])).status == "canceled"  # type: ignore[union-attr]
        await settle(pilot)
        detail = app.screen
        assert isinstance(detail, TaskDetailScreen) and detail.follow_key == "signup-ada"
        assert detail.task_id == new.id


async def test_purge_previews_then_deletes(demo_db: Path, db: SQLiteStore) -> None:
    app = demo_app(demo_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("P")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, PurgeScreen)
        screen.query_one("#older", Input).value = "soon"
        await pilot.pause(0.2)
        assert "not a duration" in str(screen.query_one("#preview", Static).render())
        assert screen.query_one("#purge", Button).disabled
        # A bare number is no cutoff (it once read as milliseconds: "7" = every task).
        screen.query_one("#older", Input).value = "7"
        await pilot.pause(0.2)
        assert "not a duration" in str(screen.query_one("#preview", Static).render())
        assert screen.query_one("#purge", Button).disabled
        screen.query_one("#older", Input).value = "0"
        screen.query_one("#status").value = "failed"  # type: ignore[attr-defined]
        await pilot.pause(0.3)
        await screen.workers.wait_for_complete()
        await pilot.pause()
        assert "Would delete 1 task(s)" in str(screen.query_one("#preview", Static).render())
        await pilot.click("#purge")
        await pilot.pause()
        await confirm(pilot, expect="1 terminal task(s)")
        assert await db.get(tid(6)) is None and await db.get_by_key("invoice-1002") is None
        assert await db.get(tid(5)) is not None
        assert any("Purged 1 task(s)" in n for n in notes(app))


async def test_read_only_disables_every_control(demo_db: Path, db: SQLiteStore) -> None:
    app = demo_app(demo_db, read_only=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        view = await on_row(pilot, tid(0))
        for key in ("c", "C", "r", "R", "e", "n", "P"):
            await pilot.press(key)
            await pilot.pause()
            assert not app.dialog_open, key
        assert view.check_action("cancel", ()) is None and app.check_action("submit", ()) is None
        assert view.check_action("open_task", ()) is True
        await pilot.press("4")
        await settle(pilot)
        for key in ("c", "r", "e"):
            await pilot.press(key)
            await pilot.pause()
            assert not app.dialog_open, key
        app.controls.cancel_tasks(view.targets())  # even called directly: refused
        await pilot.pause()
        assert not app.dialog_open
        with pytest.raises(StoreUnavailable):
            await app.client.cancel(tid(0))  # and the store itself cannot write
    assert (await db.get(tid(0))).status == "queued"  # type: ignore[union-attr]


async def test_capital_c_in_leases_cancels_the_workers_tasks_and_help_agrees(
    demo_db: Path, db: SQLiteStore
) -> None:
    from cairnq_tui import keymap
    from cairnq_tui.widgets.leases_view import LeasesView

    app = demo_app(demo_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("3")
        await settle(pilot)
        leases = app.screen.query_one(LeasesView)
        leases.table.move_cursor(row=leases.table.row_keys().index("worker:worker_B"))
        await pilot.press("C")
        await pilot.pause()
        body = await confirm(pilot, expect=f"{tid(3)}  build_report  running → cancel requested")
        assert tid(4) in body and tid(2) not in body  # worker_B's two tasks, not worker_A's
        assert (await db.get(tid(3))).cancel_requested  # type: ignore[union-attr]
        assert not (await db.get(tid(2))).cancel_requested  # type: ignore[union-attr]
    # ? lists C where it works (Tasks and Leases), and not in the task detail.
    sections = dict(keymap.SECTIONS)
    assert "C" in {b.key for b in sections["Leases view"]}
    assert "C" in {b.key for b in sections["Tasks view"]}
    assert "C" not in {b.key for b in sections["Task detail"]}
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    assert "| `C` | Tasks, Leases |" in readme and "| `c` | Tasks, Leases, detail |" in readme
