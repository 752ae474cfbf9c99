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


async def test_a_young_collection_due_soon_runs_after_a_drawn_refresh(demo_db: Path) -> None:
    """Half the young threshold allocated: the collection runs once the refresh has drawn
    (the loop idle), not later when it falls due, often between a keypress and its frame."""
    started: list[tuple[int, int]] = []  # (generation, young count) of every collection

    def watch(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started.append((info["generation"], gc.get_count()[0]))

    app = demo_app(demo_db)
    async with app.run_test(size=SNAPSHOT_SIZE) as pilot:
        await settle(pilot)
        await pilot.pause()
        gc.callbacks.append(watch)
        try:
            gc.collect(0)
            kept = [[n] for n in range(GC_YOUNG_THRESHOLD * 6 // 10)]  # tracked, alive
            started.clear()
            await pilot.press("ctrl+r")
            await settle(pilot)
            await pilot.pause()
        finally:
            gc.callbacks.remove(watch)
        assert len(kept) > GC_YOUNG_THRESHOLD // 2
        early = [(gen, young) for gen, young in started if young <= GC_YOUNG_THRESHOLD]
        assert early, f"no collection before the young threshold: {started}"
        assert all(gen < 2 for gen, _ in early)  # young (or middle when that is due)
