"""Switching the running console to another named target with ``:``, and the name a
``danger`` target asks for before every bulk action (Pilot, two real SQLite files)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from console_states import build_demo_db, demo_app, demo_rows, settle
from textual.widgets import Input, OptionList

from cairnq_tui.hosting import WorkerHost
from cairnq_tui.screens.confirm import ConfirmScreen
from cairnq_tui.screens.purge import PurgeScreen
from cairnq_tui.screens.targets import TargetPickerScreen, TypeNameScreen
from cairnq_tui.widgets.tasks_view import TasksView
from engine import CairnQ, SQLiteStore
from engine.inspection import TaskFilter

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


async def test_a_danger_target_asks_for_its_name_before_bulk_actions(
    two_targets: tuple[Path, Path],
) -> None:
    app = on_demo(two_targets)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("C")  # not a danger target: straight to the confirmation
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("escape")

        await switch(pilot, "books")
        for key, then in (("C", ConfirmScreen), ("R", ConfirmScreen), ("P", PurgeScreen)):
            await pilot.press(key)
            assert isinstance(app.screen, TypeNameScreen), key
            await pilot.press(*"demo", "enter")  # another target's name: refused
            assert isinstance(app.screen, TypeNameScreen)
            assert app.screen.query_one(Input).value == ""
            await pilot.press(*"books", "enter")
            await app.workers.wait_for_complete()
            await pilot.pause()
            assert isinstance(app.screen, then), key
            await pilot.press("escape")
            await pilot.pause()

        await pilot.press("C", "escape")  # escape at the name: nothing further opens
        await pilot.pause()
        assert not isinstance(app.screen, TypeNameScreen | ConfirmScreen)
        canceled = await app.inspector.tasks_page(TaskFilter(status="canceled"), limit=50)
        assert len(canceled.rows) == 1  # nothing was canceled along the way


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
