"""SVG snapshots of the hosted-worker views: the demo worker frozen mid-work
(``hosted_states``) over the deterministic demo database, with a fixed clock.

Plain ``def`` tests: ``snap_compare`` runs its own event loop. Update with
``pytest tests/tui/test_hosted_snapshots.py --snapshot-update`` after a deliberate change.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from console_states import SNAPSHOT_SIZE, press
from hosted_states import HOSTED_VIEWS, hosted_app


@pytest.mark.parametrize(("view", "keys"), list(HOSTED_VIEWS.items()))
def test_hosted_view_snapshot(
    snap_compare: Any, demo_db: Path, view: str, keys: tuple[str, ...]
) -> None:
    assert snap_compare(hosted_app(demo_db), terminal_size=SNAPSHOT_SIZE, run_before=press(*keys))
