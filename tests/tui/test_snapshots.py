"""SVG snapshots of every view, on the deterministic demo database with a frozen clock.

Plain ``def`` tests: ``snap_compare`` runs its own event loop. Update with
``pytest tests/tui/test_snapshots.py --snapshot-update`` after a deliberate change.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from console_states import demo_app, settle
from textual.widgets import Input

SIZE = (150, 40)


def press(*keys: str) -> Any:
    async def run_before(pilot: Any) -> None:
        await settle(pilot)
        for key in keys:
            await pilot.press(key)
            await settle(pilot)
        for widget in pilot.app.screen.query(Input):
            widget.cursor_blink = False

    return run_before


@pytest.mark.parametrize(
    ("view", "keys"),
    [
        ("tasks", ()),
        ("queues", ("2",)),
        ("leases", ("3",)),
        ("keys", ("4",)),
        ("detail", ("down", "down", "down", "enter")),
        ("help", ("question_mark",)),
        ("submit", ("n",)),
    ],
)
def test_view_snapshot(snap_compare: Any, demo_db: Path, view: str, keys: tuple[str, ...]) -> None:
    assert snap_compare(demo_app(demo_db), terminal_size=SIZE, run_before=press(*keys))


def test_read_only_snapshot(snap_compare: Any, demo_db: Path) -> None:
    assert snap_compare(demo_app(demo_db, read_only=True), terminal_size=SIZE, run_before=press())
