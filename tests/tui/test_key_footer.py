"""KeyFooter: the focused chain's keys in one widget, repainted only when they change,
and a click on a key presses it (Pilot, on the demo database)."""

from __future__ import annotations

from pathlib import Path

import pytest
from console_states import SNAPSHOT_SIZE, demo_app, settle
from textual.pilot import Pilot

from cairnq_tui.screens.help import HelpScreen
from cairnq_tui.screens.main import MainScreen
from cairnq_tui.widgets.key_footer import KeyFooter


def footer(pilot: Pilot[None]) -> KeyFooter:
    return pilot.app.screen.query_one(KeyFooter)


def descriptions(pilot: Pilot[None]) -> list[str]:
    return [item.description for item in footer(pilot).keys]


async def click_key(pilot: Pilot[None], description: str) -> None:
    """Click the middle of the key labelled ``description`` as drawn."""
    bar = footer(pilot)
    bar.render()  # the spans of what is drawn now
    for start, end, item in bar._spans:
        if item.description == description:
            await pilot.click(KeyFooter, offset=((start + end) // 2, 0))
            return
    raise AssertionError(f"{description!r} is not drawn in the footer")


async def test_footer_shows_the_focused_views_keys_and_follows_focus(demo_db: Path) -> None:
    app = demo_app(demo_db)
    async with app.run_test(size=SNAPSHOT_SIZE) as pilot:
        await settle(pilot)
        tasks_keys = descriptions(pilot)
        assert {"Select", "Cancel", "Cancel all", "Retry", "Quit", "Help"} <= set(tasks_keys)
        assert "Follow key" not in tasks_keys
        drawn = footer(pilot).render().plain
        assert " c Cancel " in drawn and " ? Help " in drawn and "^p palette" in drawn

        await pilot.press("4")
        await settle(pilot)
        keys_keys = descriptions(pilot)
        assert "Follow key" in keys_keys and "Cancel" not in keys_keys
        assert " w Follow key " in footer(pilot).render().plain

        await pilot.press("down", "down", "down", "1", "down", "enter")  # a task's detail
        await settle(pilot)
        assert not isinstance(app.screen, MainScreen)
        assert "Back" in descriptions(pilot)


async def test_footer_repaints_only_when_the_keys_change(demo_db: Path) -> None:
    app = demo_app(demo_db)
    async with app.run_test(size=SNAPSHOT_SIZE) as pilot:
        await settle(pilot)
        bar = footer(pilot)
        await pilot.press("5")  # Waits: the hosted views' keys
        await settle(pilot)
        changes = bar.changes
        waits_keys = bar.keys
        assert waits_keys and "Cancel" not in descriptions(pilot)
        await pilot.press("6", "8", "5")  # Quotas, Calls, Waits: the same keys
        await settle(pilot)
        assert footer(pilot) is bar  # one widget, never recomposed
        assert bar.keys == waits_keys
        assert bar.changes == changes
        await pilot.press("1")
        await settle(pilot)
        assert bar.changes == changes + 1 and "Cancel" in descriptions(pilot)


async def test_clicking_a_key_runs_its_action(demo_db: Path) -> None:
    app = demo_app(demo_db)
    async with app.run_test(size=SNAPSHOT_SIZE) as pilot:
        await settle(pilot)
        assert not app.paused
        await click_key(pilot, "Pause")
        await settle(pilot)
        assert app.paused
        await click_key(pilot, "Help")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)


async def test_a_disabled_key_is_shown_and_clicking_it_does_nothing(demo_db: Path) -> None:
    app = demo_app(demo_db, read_only=True)
    async with app.run_test(size=SNAPSHOT_SIZE) as pilot:
        await settle(pilot)
        keys = {item.description: item for item in footer(pilot).keys}
        assert not keys["Submit"].enabled and keys["Help"].enabled
        rang: list[bool] = []
        app.bell = lambda: rang.append(True)  # type: ignore[method-assign]
        await click_key(pilot, "Submit")
        await settle(pilot)
        assert isinstance(app.screen, MainScreen) and rang == [True]


async def test_hovering_a_key_highlights_only_that_key(demo_db: Path) -> None:
    app = demo_app(demo_db)
    async with app.run_test(size=SNAPSHOT_SIZE) as pilot:
        await settle(pilot)
        bar = footer(pilot)
        plain = bar.render()
        start, end, item = next(span for span in bar._spans if span[2].description == "Help")
        await pilot.hover(KeyFooter, offset=(start + 1, 0))
        assert bar._hover == item.key
        hovered = bar.render()
        assert hovered.plain == plain.plain
        changed = [
            x
            for x in range(len(plain.plain))
            if plain.get_style_at_offset(app.console, x)
            != hovered.get_style_at_offset(app.console, x)
        ]
        assert changed and min(changed) >= start and max(changed) < end


@pytest.mark.parametrize("width", [80, 120, 150, 200])
async def test_every_key_drawn_is_whole_at_any_width(demo_db: Path, width: int) -> None:
    """A key that does not fit is left out whole (at 150 columns Purge was drawn as
    "P ▏"); it still works by its key and is listed in help and the palette."""
    app = demo_app(demo_db)
    async with app.run_test(size=(width, SNAPSHOT_SIZE[1])) as pilot:
        await settle(pilot)
        bar = footer(pilot)
        drawn = bar.render()
        assert drawn.cell_len == width
        keys = [item for _, _, item in bar._spans if item is not bar.palette]
        assert keys == list(bar.keys[: len(keys)])  # the first keys, in order
        assert keys, "no key fits"
        for start, end, item in bar._spans:
            assert drawn.plain[start:end] == f" {item.display} {item.description} "
        assert drawn.plain.endswith(" ^p palette ")
        if len(keys) < len(bar.keys):
            left_out = bar.keys[len(keys)]
            assert f" {left_out.display} " not in drawn.plain[bar._spans[len(keys) - 1][1] :]
