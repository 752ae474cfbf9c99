"""Watch signals bring a refresh forward, but at most one per EARLY_REFRESH_EVERY_S
while they keep coming (a busy database signals all the time)."""

from __future__ import annotations

from pathlib import Path

from console_states import SNAPSHOT_SIZE, demo_app, settle

from cairnq_tui.app import EARLY_REFRESH_EVERY_S, EARLY_REFRESH_GAP_S
from cairnq_tui.messages import DatabaseWoke


async def wait_for_tick(pilot, ticks: int) -> None:  # type: ignore[no-untyped-def]
    for _ in range(500):  # generous: 10 s under load
        if pilot.app.ticks > ticks:
            return
        await pilot.pause(0.02)
    raise AssertionError("no refresh")


async def test_signals_bring_one_refresh_forward_per_period(demo_db: Path) -> None:
    app = demo_app(demo_db)  # polls once an hour: every refresh here is a signal's
    async with app.run_test(size=SNAPSHOT_SIZE) as pilot:
        await settle(pilot)
        ticks = app.ticks
        app.post_message(DatabaseWoke("queued"))  # the first signal after a quiet spell
        await wait_for_tick(pilot, ticks)
        await settle(pilot)
        early = app._early_at
        assert app.ticks == ticks + 1

        # More signals right after: the next refresh waits for the period, not the gap
        # (it can only come later on a loaded machine, never sooner).
        ticks = app.ticks
        for _ in range(5):
            app.post_message(DatabaseWoke("completed"))
            await pilot.pause()
        await wait_for_tick(pilot, ticks)  # and then it comes, long before the hourly poll
        await settle(pilot)
        assert app.ticks == ticks + 1
        assert app._early_at - early >= EARLY_REFRESH_EVERY_S
        assert EARLY_REFRESH_EVERY_S > 2 * EARLY_REFRESH_GAP_S  # what the limit is about


async def test_a_signal_during_a_refresh_is_not_lost(demo_db: Path) -> None:
    app = demo_app(demo_db)
    async with app.run_test(size=SNAPSHOT_SIZE) as pilot:
        await settle(pilot)
        ticks = app.ticks
        app.refresh_now(force=True)
        assert app._in_flight
        app.post_message(DatabaseWoke("queued"))  # arrives while that refresh is in flight
        await wait_for_tick(pilot, ticks + 1)  # a second refresh follows, not the hourly poll
