"""Switching the running console to another named target with ``:``, and the name a
``danger`` target asks for before every bulk action (Pilot, two real SQLite files)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from console_states import build_demo_db, demo_app, demo_rows, fill_submit, settle
from textual.widgets import Button, Input, OptionList

from cairnq_tui.clock import system_clock
from cairnq_tui.hosting import WorkerHost
from cairnq_tui.screens.confirm import ConfirmScreen
from cairnq_tui.screens.purge import PurgeScreen
from cairnq_tui.screens.targets import TargetPickerScreen
from cairnq_tui.widgets.tasks_view import TasksView
from engine import CairnQ, SQLiteStore

SIZE = (160, 50)
OTHER_NAMES = ("payroll_export", "ledger_close")


async def other_db(path: Path) -> Path:
    """A second cairnq database whose task names the demo database does not have."""
    store = SQLiteStore(path)
    await store.connect()
    client = CairnQ(store)
    for i in range(6):
        await client.submit(OTHER_NAMES[i % 2], {"n": i}, queue="finance")
    failed = await client.submit("ledger_close", {"n": 99}, queue="finance", max_attempts=1)
    await client.cancel(failed.id)
    await client.submit("ledger_close", {"n": 100}, queue="finance", key="books-key")
    await store.close()
    return path


@pytest.fixture
async def two_targets(tmp_path: Path) -> tuple[Path, Path]:
    demo = build_demo_db(tmp_path / "demo.db")
    other = await other_db(tmp_path / "other.db")
    config = tmp_path / "config.toml"
    config.write_text(
        f'[targets.demo]\npath = "{demo}"\n\n'
        f'[targets.books]\npath = "{other}"\ndanger = true\nrefresh = 3600\n',
        encoding="utf-8",
    )
    return demo, config


def on_demo(two_targets: tuple[Path, Path], **settings: Any) -> Any:
    """The console launched on the config's "demo" target."""
    demo, config = two_targets
    return demo_app(demo, name="demo", config_path=str(config), **settings)


def shown_names(app: Any) -> set[str]:
    table = app.screen.query_one(TasksView).table
    return {str(table.get_row(key)[2]) for key in table.row_keys()}


async def switch(pilot: Any, typed: str) -> None:
    await pilot.press("colon")
    assert isinstance(pilot.app.screen, TargetPickerScreen)
    await pilot.press(*typed, "enter")
    await pilot.app.workers.wait_for_complete()
    await settle(pilot)


async def test_colon_switches_to_another_target_without_restarting(
    two_targets: tuple[Path, Path],
) -> None:
    app = on_demo(two_targets)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        demo_names = {str(r["name"]) for r in demo_rows()[0]}
        assert shown_names(app) & demo_names and not shown_names(app) & set(OTHER_NAMES)
        bar = app.status_bar()
        assert bar is not None and bar.target_name == "demo" and not bar.danger

        await switch(pilot, "books")
        assert shown_names(app) == set(OTHER_NAMES)
        bar = app.status_bar()
        assert bar is not None and bar.target_name == "books" and bar.danger
        assert bar.has_class("-danger") and "books" in str(bar.render())
        assert app.settings.target.raw.endswith("other.db") and not app.read_only

        await switch(pilot, "dem")  # the picker takes the highlighted match
        assert shown_names(app) & demo_names and not shown_names(app) & set(OTHER_NAMES)
        assert app.status_bar().target_name == "demo"  # type: ignore[union-attr]


async def test_a_console_started_read_only_stays_read_only(
    two_targets: tuple[Path, Path],
) -> None:
    app = on_demo(two_targets, read_only=True, locked_read_only=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await switch(pilot, "books")
        assert shown_names(app) == set(OTHER_NAMES)
        assert app.read_only and app.status_bar().read_only  # type: ignore[union-attr]


async def test_a_danger_target_asks_for_its_name_before_every_write(
    two_targets: tuple[Path, Path],
) -> None:
    app = on_demo(two_targets)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("c")  # not a danger target: the confirmation takes y
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen) and app.screen.type_name is None
        await pilot.press("escape")

        app.clock = system_clock  # books' tasks were written now: purge counts them
        await switch(pilot, "books")
        books = CairnQ(SQLiteStore(two_targets[0].parent / "other.db"))
        view = app.screen.query_one(TasksView)
        queued = [k for k in view.table.row_keys() if str(view.table.get_row(k)[4]) == "queued"]
        queued = queued[1:]  # one stays live, for C below
        # Twenty-odd rows selected, then c and y: today's bypass. y is typed into the
        # name field, enter with it (or another target's name) does nothing.
        for task_id in queued:
            view.table.move_cursor(row=view.table.row_keys().index(task_id))
            await pilot.press("space")
        await pilot.press("c")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, ConfirmScreen) and screen.type_name == "books"
        await pilot.press("y")
        await pilot.pause()
        assert app.screen is screen
        await pilot.press("enter")
        await pilot.press(*"demo", "enter")
        await pilot.pause()
        assert app.screen is screen and screen.query_one("#type-name", Input).value == ""
        screen.query_one("#confirm", Button).press()  # the button asks for the name too
        await pilot.pause()
        assert app.screen is screen
        for task_id in queued:
            assert (await books.get(task_id)).status == "queued"  # type: ignore[union-attr]
        await pilot.press(*"books", "enter")
        await settle(pilot)
        for task_id in queued:
            assert (await books.get(task_id)).status == "canceled"  # type: ignore[union-attr]

        # Every other write asks too: each reaches a confirmation that wants the name.
        await pilot.press("r")  # the highlighted (now canceled) task
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen) and app.screen.type_name == "books"
        await pilot.press("escape")
        for key in ("C", "R"):
            await pilot.press(key)
            await app.workers.wait_for_complete()
            await pilot.pause()
            assert isinstance(app.screen, ConfirmScreen) and app.screen.type_name == "books", key
            await pilot.press("escape")
        await pilot.press("P")
        await pilot.pause()
        purge = app.screen
        assert isinstance(purge, PurgeScreen)
        purge.query_one("#older", Input).value = "0"
        await pilot.pause(0.3)
        await purge.workers.wait_for_complete()
        await pilot.pause()
        preview = str(purge.query_one("#preview").render())
        assert "Would delete" in preview and "delete 0 " not in preview, preview
        purge.query_one("#purge", Button).press()  # (a toast may cover it: no click)
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen) and app.screen.type_name == "books"
        await pilot.press("escape")
        await pilot.press("n")
        await pilot.pause()
        await fill_submit(pilot, name="ledger_close", payload="{}")
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen) and app.screen.type_name == "books"
        await pilot.press("escape", "escape")
        await pilot.pause()
        app.controls.cancel_by_key("books-key")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen) and app.screen.type_name == "books"
        await pilot.press("escape")
        await books.store.close()


def test_only_the_write_path_confirms_or_starts_a_write() -> None:
    """The danger guard cannot be forgotten by a new write: every confirmation and
    every write worker of the console comes from ``controls/_write_path.py``."""
    root = Path(__file__).parents[2] / "cairnq_tui"
    confirming = sorted(
        str(p.relative_to(root))
        for p in root.rglob("*.py")
        if re.search(r"(?<!class )ConfirmScreen\(", p.read_text())
    )
    assert confirming == ["controls/_write_path.py"]
    writing = sorted(
        str(p.relative_to(root))
        for p in root.rglob("*.py")
        if "client.cancel" in p.read_text()
        or "client.retry" in p.read_text()
        or "client.submit" in p.read_text()
        or "client.purge" in p.read_text()
    )
    # (actions.py holds the writes the console and the command line share; demo.py
    # fills the demo database before any console opens on it.)
    assert writing == ["actions.py", "controls/_submit.py", "controls/_tasks.py", "demo.py"]
    # In the console, only the controls call the shared writes (ops/ is the command line).
    calls = ("actions.cancel_ids(", "actions.retry_ids(", "actions.purge(", "actions.submit(")
    sharing = sorted(
        str(p.relative_to(root))
        for p in root.rglob("*.py")
        if any(call in p.read_text() for call in calls)
    )
    assert [p for p in sharing if not p.startswith("ops/")] == [
        "controls/_purge.py",
        "controls/_tasks.py",
    ]
    workers = sorted(
        str(p.relative_to(root))
        for p in (root / "controls").rglob("*.py")
        if 'name="write"' in p.read_text()
    )
    assert workers == ["controls/_write_path.py"]


@pytest.mark.parametrize(
    ("specs", "said"),
    [
        (["myapp.jobs:worker"], "This console hosts --worker myapp.jobs:worker on its target"),
        (["a:w", "b:w"], "This console hosts --worker a:w, b:w on its target"),
        # The demo hosts its worker without any --worker: it says so in its own words.
        (["cairnq_tui.demo:make_worker"], "This console hosts the demo worker on its target"),
    ],
)
async def test_switching_is_refused_while_the_console_hosts_workers(
    two_targets: tuple[Path, Path], specs: list[str], said: str
) -> None:
    app = on_demo(two_targets)
    # An unstarted host: what it hosts is all the refusal looks at.
    app.host = WorkerHost(specs, make_store=lambda: app.store, target_text="unused")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("colon")
        await pilot.pause()
        assert not isinstance(app.screen, TargetPickerScreen)
        assert app.settings.name == "demo"
        messages = [n.message for n in app._notifications]
        assert [m for m in messages if "cannot switch" in m] == [f"{said}: it cannot switch."]


async def test_the_palette_offers_every_target(two_targets: tuple[Path, Path]) -> None:
    app = on_demo(two_targets)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("ctrl+p", *"switch to target books")
        for _ in range(500):  # the palette searches in a task of its own: wait for the hit
            await pilot.pause(0.02)
            hits = app.screen.query(OptionList)
            if (
                hits
                and hits.first().option_count
                and "books" in str(hits.first().get_option_at_index(0).prompt)
            ):
                break
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await settle(pilot)
        assert app.settings.name == "books"
        assert shown_names(app) == set(OTHER_NAMES)
