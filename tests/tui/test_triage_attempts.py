"""Attempt history in the task detail (issue 22.6): the row's last error, the
recorder's attempts, each marked with its source, and earlier attempts said to be
unknown; on cairnq 0.15.1 data, SQLite and Postgres."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from console_states import DECLINED, demo_app, demo_rows, settle
from textual.widgets import Static
from triage_console_support import DIALECTS, Shared, console_on, shared_db

from cairnq_tui.history import SeenFailure
from cairnq_tui.screens.detail import TaskDetailScreen

SIZE = (200, 60)
ROWS, _ = demo_rows()


def attempts(app: object) -> str:
    screen = app.screen  # type: ignore[attr-defined]
    assert isinstance(screen, TaskDetailScreen)
    return str(screen.query_one("#attempts", Static).render())


async def test_a_failed_task_shows_its_row_error_and_unknown_earlier_attempts(
    demo_db: Path,
) -> None:
    app = demo_app(demo_db, history=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.open_task(ROWS[6]["id"])  # charge_card, failed on attempt 3 of 3
        await settle(pilot)
        text = attempts(app)
        assert "Attempts  (3 of 3 started)" in text
        assert "attempts 1-2: not known" in text
        assert f"attempt 3  3m00s ago  failed  CardDeclined: {DECLINED['message']}  [row]" in text


async def test_recorded_attempts_fill_in_what_the_row_lost(demo_db: Path) -> None:
    app = demo_app(demo_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.history is not None
        task_id = ROWS[6]["id"]
        app.history.file.record_failures(
            0,
            [
                SeenFailure(
                    task_id,
                    1,
                    "charge_card",
                    "billing",
                    "queued",
                    "TimeoutError",
                    "gateway timeout",
                    ROWS[6]["completed_at_ms"] - 120_000,
                ),
                SeenFailure(
                    task_id,
                    2,
                    "charge_card",
                    "billing",
                    "queued",
                    "TimeoutError",
                    "gateway timeout",
                    ROWS[6]["completed_at_ms"] - 60_000,
                ),
            ],
        )
        app.open_task(task_id)
        await settle(pilot)
        text = attempts(app)
        assert "not known" not in text
        lines = [line.strip() for line in text.splitlines()[1:]]
        assert lines[0].startswith("attempt 1") and lines[0].endswith("[recorder]")
        assert "failed, retried  TimeoutError: gateway timeout" in lines[1]
        # The recorder saw attempt 3 fail too: one line, both sources.
        assert lines[2].startswith("attempt 3") and lines[2].endswith("[recorder + row]")
        assert len(lines) == 3


@pytest.fixture(params=DIALECTS)
async def shared(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Shared]:
    async for s in shared_db(request, tmp_path):
        yield s


@pytest.mark.peer
async def test_a_retrying_task_cairnq_failed_is_recorded_and_shown(shared: Shared) -> None:
    retrying = await shared.fail(
        "charge", "TimeoutError", "gave up after 30 s", retryable=True, max_attempts=3
    )
    app = console_on(shared)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)  # the Tasks view drew the retrying row: the recorder noted it
        assert app.history is not None
        await app.history.sample()
        [seen] = app.history.file.attempts(retrying)
        assert (seen.attempt, seen.error_type) == (1, "TimeoutError")
        app.open_task(retrying)
        await settle(pilot)
        text = attempts(app)
        assert "Attempts  (1 of 3 started)" in text
        assert "failed, retry due  TimeoutError: gave up after 30 s  [recorder + row]" in text
        assert "not known" not in text


async def test_a_running_task_shows_its_attempt_from_the_row(demo_db: Path) -> None:
    app = demo_app(demo_db, history=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.open_task(ROWS[3]["id"])  # build_report, running attempt 2 on worker_B
        await settle(pilot)
        text = attempts(app)
        assert "attempt 1: not known" in text
        assert "attempt 2  4m00s ago  running on worker_B  [row]" in text
