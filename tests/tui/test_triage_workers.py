"""The Workers view (issue 22.10): workers holding leases now from the rows, one
that stopped heartbeating with the tasks waiting for recovery, and workers seen
before from the recorder; cairnq 0.15.1 claims on SQLite and Postgres."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from console_states import demo_app, demo_rows, settle
from textual.widgets import Static
from triage_console_support import DIALECTS, Shared, console_on, shared_db

from cairnq_tui.panels import open_panel
from cairnq_tui.widgets.workers_view import WorkersView

SIZE = (200, 50)
ROWS, _ = demo_rows()


async def open_workers(pilot: Any) -> WorkersView:
    await settle(pilot)
    open_panel(pilot.app, "Workers")
    await settle(pilot)
    view: WorkersView = pilot.app.screen.query_one(WorkersView)
    return view


def cells(view: WorkersView, key: str) -> list[str]:
    return [str(c) for c in view.table.get_row(key)]


async def test_workers_now_and_one_stopped_heartbeating(demo_db: Path) -> None:
    app = demo_app(demo_db)
    async with app.run_test(size=SIZE) as pilot:
        view = await open_workers(pilot)
        # worker_A holds a live lease; worker_B holds one live and one expired.
        assert set(view.table.row_keys()) == {"now:worker_A", "now:worker_B"}
        a = cells(view, "now:worker_A")
        assert a[1:4] == ["holding leases", "1", "send_digest"]
        b = cells(view, "now:worker_B")
        assert b[1] == "holding leases" and b[2] == "2"
        assert b[7] == f"1: {ROWS[3]['id']}"  # the expired lease waits for recovery
        info = str(app.screen.query_one("#workers-info", Static).render())
        assert "2 holding leases now (0 stopped heartbeating)" in info


@pytest.fixture(params=DIALECTS)
async def shared(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Shared]:
    async for s in shared_db(request, tmp_path):
        yield s


@pytest.mark.peer
async def test_a_stopped_worker_and_one_seen_before(shared: Shared) -> None:
    await shared.submit("crunch", queue="q1")
    await shared.submit("crunch", queue="q2")
    stuck = await shared.claim("w_stuck", queue="q1", lease_ms=60_000)
    await shared.claim("w_done", queue="q2", lease_ms=60_000)
    app = console_on(shared)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.history is not None
        await app.history.sample()  # the recorder sees both workers
        # w_done finishes its task; w_stuck's lease runs out unrenewed.
        [(done_id,)] = shared.sql("select id from cairnq_tasks where worker_id = 'w_done'")
        await shared.peer.store.complete(task_id=done_id, worker_id="w_done", result=None)
        shared.sql(
            "update cairnq_tasks set lease_until_ms = lease_until_ms - 3600000 where id = ?",
            (stuck.id,),
        )
        view = await open_workers(pilot)
        assert view.table.row_keys() == ["now:w_stuck", "seen:w_done"]
        stopped = cells(view, "now:w_stuck")
        assert stopped[1] == "STOPPED HEARTBEATING"
        assert stopped[7] == f"1: {stuck.id}"
        before = cells(view, "seen:w_done")
        assert before[1:5] == ["seen before", "(1)", "crunch", "q2"]
