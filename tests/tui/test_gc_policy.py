"""The console's garbage-collection policy: the startup heap frozen and the young
threshold raised while it runs, CPython's settings back when it exits."""

from __future__ import annotations

import gc
from pathlib import Path

from console_states import SNAPSHOT_SIZE, demo_app, settle

from cairnq_tui.app import GC_YOUNG_THRESHOLD


async def test_heap_frozen_and_young_threshold_raised_until_exit(demo_db: Path) -> None:
    before = gc.get_threshold()
    assert before[0] < GC_YOUNG_THRESHOLD  # CPython's default (700), or a test left it high
    app = demo_app(demo_db)
    async with app.run_test(size=SNAPSHOT_SIZE) as pilot:
        await settle(pilot)
        await pilot.pause()
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold() == (GC_YOUNG_THRESHOLD, before[1], before[2])
        await pilot.press("2")  # a view switch keeps the policy
        await settle(pilot)
        assert gc.get_threshold()[0] == GC_YOUNG_THRESHOLD
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
