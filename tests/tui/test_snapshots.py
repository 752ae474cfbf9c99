"""SVG snapshots of every view, on the deterministic demo database with a frozen clock.

Plain ``def`` tests: ``snap_compare`` runs its own event loop. Update with
``pytest tests/tui/test_snapshots.py --snapshot-update`` after a deliberate change.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from console_states import SNAPSHOT_SIZE, VIEWS, demo_app, press


@pytest.mark.parametrize(("view", "keys"), list(VIEWS.items()))
def test_view_snapshot(snap_compare: Any, demo_db: Path, view: str, keys: tuple[str, ...]) -> None:
    assert snap_compare(demo_app(demo_db), terminal_size=SNAPSHOT_SIZE, run_before=press(*keys))


def test_read_only_snapshot(snap_compare: Any, demo_db: Path) -> None:
    app = demo_app(demo_db, read_only=True)
    assert snap_compare(app, terminal_size=SNAPSHOT_SIZE, run_before=press())


def test_danger_confirmation_snapshot(snap_compare: Any, demo_db: Path) -> None:
    """On a danger target the confirmation asks for the target's name (issue 20.9)."""
    app = demo_app(demo_db, name="prod", danger=True)
    assert snap_compare(app, terminal_size=SNAPSHOT_SIZE, run_before=press("c"))
