"""Pilot tests of issue 24.14 (screens open faster): the submit form and the task detail
are built once and reused, so every reuse must show a screen as a new one would.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from console_states import demo_app, demo_rows, settle
from textual import events
from textual.message import Message
from textual.widgets import Button, Collapsible, Input, Label, Select, Static, TextArea

from cairnq_tui.messages import DetailRefreshed
from cairnq_tui.screens.confirm import ConfirmScreen
from cairnq_tui.screens.detail import TaskDetailScreen
from cairnq_tui.screens.submit import SubmitScreen
from cairnq_tui.widgets.keys_view import KeysView
from cairnq_tui.widgets.tasks_view import TasksView
from engine import SQLiteStore

SIZE = (160, 50)
ROWS, KEYS = demo_rows()

#: Every field of a new submit form, as it first opens.
BLANK = {"name": "", "key": "", "queue": "default", "priority": "0", "delay": "0"}


@pytest.fixture
async def db(demo_db: Path) -> AsyncIterator[SQLiteStore]:
    store = SQLiteStore(demo_db)
    await store.connect()
    yield store
    await store.close()


def assert_blank(form: SubmitScreen) -> None:
    """``form`` is as a newly built submit form: empty fields, focus on the name."""
    for field, value in BLANK.items():
        assert form.query_one(f"#{field}", Input).value == value, field
    assert form.query_one("#max_attempts", Input).value == "3"
    assert not form.query_one("#key", Input).disabled
    conflict = form.query_one("#conflict", Select)
    assert conflict.value == "reuse" and not conflict.disabled
    editor = form.query_one("#payload", TextArea)
    assert editor.text == "" and editor.cursor_location == (0, 0)
    assert "Submit a task" in str(form.query_one(".dialog-title", Label).render())
    assert str(form.query_one("#payload-error", Static).render()) == ""
    assert "name is required" in str(form.query_one("#form-error", Static).render())
    assert form.query_one("#submit", Button).disabled
    assert form.focused is form.query_one("#name", Input)


async def open_form(pilot: Any) -> SubmitScreen:
    await pilot.press("n")
    await settle(pilot)
    form = pilot.app.screen
    assert isinstance(form, SubmitScreen)
    return form


async def test_a_reopened_submit_form_is_clean_and_submits_the_new_values(
    demo_db: Path, db: SQLiteStore
) -> None:
    app = demo_app(demo_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        first = await open_form(pilot)
        assert_blank(first)
        await pilot.press(*"old_name", "tab", *'{"old": 1}')
        first.query_one("#key", Input).value = "old-key"
        first.query_one("#priority", Input).value = "not a number"
        first.query_one("#conflict", Select).value = "reject"
        await pilot.pause()
        assert "priority must be a whole number" in str(
            first.query_one("#form-error", Static).render()
        )
        await pilot.press("escape")  # cancelled: nothing written
        await settle(pilot)

        again = await open_form(pilot)
        assert again is first  # reused, not built again
        assert_blank(again)
        await pilot.press("ctrl+z")  # the last open's typing is not in the undo history
        await pilot.pause()
        assert again.query_one("#payload", TextArea).text == ""

        # What is typed now is what is submitted.
        await pilot.press(*"send_welcome", "tab", *'{"user": "new"}')
        again.query_one("#key", Input).value = "signup-new"
        again.query_one("#priority", Input).value = "4"
        await pilot.pause()
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        await settle(pilot)
        created = await db.get_by_key("signup-new")
        assert created is not None
        assert (created.name, created.payload, created.priority) == (
            "send_welcome",
            {"user": "new"},
            4,
        )
        assert await db.get_by_key("old-key") is None


async def test_a_new_submit_after_a_replace_is_not_prefilled(demo_db: Path) -> None:
    app = demo_app(demo_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("4")
        await settle(pilot)
        keys = app.screen.query_one(KeysView)
        keys.table.move_cursor(row=keys.table.row_keys().index("signup-ada"))
        await pilot.press("e")
        await settle(pilot)
        form = app.screen
        assert isinstance(form, SubmitScreen)
        assert form.query_one("#key", Input).disabled
        assert '"user": "ada"' in form.query_one("#payload", TextArea).text
        assert "Replace" in str(form.query_one(".dialog-title", Label).render())
        await pilot.press("escape")
        await settle(pilot)

        again = await open_form(pilot)
        assert again is form
        assert_blank(again)
        assert again.validate() is None  # no name yet
        assert again.prefill.replacing is None


def shown(screen: TaskDetailScreen, part: str) -> str:
    return str(screen.query_one(part, Static).render())


async def test_a_reopened_task_detail_shows_nothing_of_the_last_task(demo_db: Path) -> None:
    app = demo_app(demo_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table = app.screen.query_one(TasksView).table
        keys = table.row_keys()
        await pilot.press("enter")
        await settle(pilot)
        first = app.screen
        assert isinstance(first, TaskDetailScreen) and first.task_id == keys[0]
        assert keys[0] in shown(first, "#detail-title") and shown(first, "#fields")
        a = first.detail
        assert a is not None
        first.query_one("#c-metadata", Collapsible).collapsed = False
        await pilot.press("escape")
        await settle(pilot)

        app.open_task(keys[1])  # what enter on the second row does
        again = app.screen
        assert again is first  # reused, not built again
        # Before its read has run: the new task's skeleton, nothing of the last one.
        assert again.task_id == keys[1] and again.detail is None
        assert "Loading" in shown(again, "#detail-title") and keys[1] in shown(
            again, "#detail-title"
        )
        for part in ("#why", "#fields", "#lineage", "#attempts"):
            assert shown(again, part) == "", part
        assert again.query_one("#c-metadata", Collapsible).collapsed
        await settle(pilot)
        assert again.detail is not None and again.detail.task.id == keys[1]
        assert keys[1] in shown(again, "#detail-title") and shown(again, "#fields")

        # A read for the last open that arrives late is dropped.
        again.post_message(DetailRefreshed(0.0, a, again.opened - 1))
        await settle(pilot)
        assert again.detail.task.id == keys[1]
        assert keys[0] not in shown(again, "#detail-title")


async def test_a_reopened_form_is_restyled_only_when_the_theme_changed(demo_db: Path) -> None:
    """A reopen skips Textual's whole restyle (the form already has its styles), but a
    theme changed while the form was not shown still reaches every field of it."""
    resumes: list[events.ScreenResume] = []

    def hook(message: Message) -> None:
        if isinstance(message, events.ScreenResume):
            resumes.append(message)

    app = demo_app(demo_db)
    async with app.run_test(size=SIZE, message_hook=hook) as pilot:
        await settle(pilot)
        form = await open_form(pilot)
        before = form.query_one("#name", Input).styles.background
        await pilot.press("escape")
        await settle(pilot)
        resumes.clear()
        assert await open_form(pilot) is form
        resumed = resumes[-1]
        assert resumed.refresh_styles is False  # styled when built, nothing changed since
        assert form.query_one("#name", Input).styles.background == before
        await pilot.press("escape")
        await settle(pilot)

        app.theme = "textual-light" if app.theme != "textual-light" else "nord"
        await pilot.pause()
        assert await open_form(pilot) is form
        fresh = SubmitScreen(names=[], queues=[])  # a form built under the new theme
        await app.push_screen(fresh)
        await pilot.pause()
        expected = fresh.query_one("#name", Input).styles.background
        assert expected != before
        app.pop_screen()
        await pilot.pause()
        assert app.screen is form
        assert form.query_one("#name", Input).styles.background == expected
