"""The Metrics view (issue 22.4): per queue and name rates and latency from the
rows, the charts, and queue depth from the recorder; on cairnq 0.15.1 data on
SQLite and Postgres too."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from console_states import demo_app, settle
from textual.widgets import Static
from textual_plotext import PlotextPlot
from triage_console_support import DIALECTS, Shared, console_on, shared_db
from triage_states import build_triage_db

from cairnq_tui.panels import open_panel
from cairnq_tui.widgets.metrics_view import MetricsView

SIZE = (200, 50)


def cells(view: MetricsView, key: str) -> list[str]:
    return [str(c) for c in view.table.get_row(key)]


async def open_metrics(pilot: Any) -> MetricsView:
    await settle(pilot)
    open_panel(pilot.app, "Metrics")
    await settle(pilot)
    view: MetricsView = pilot.app.screen.query_one(MetricsView)
    return view


async def test_metrics_per_queue_and_name_with_depth_from_the_recorder(tmp_path: Path) -> None:
    app = demo_app(build_triage_db(tmp_path / "t.db"))
    async with app.run_test(size=SIZE) as pilot:
        view = await open_metrics(pilot)
        keys = view.table.row_keys()
        # Each queue's total first, then its names.
        assert keys[:3] == ["billing\x00*", "billing\x00charge_card", "billing\x00refund"]
        billing = view.rows["billing\x00charge_card"]
        # 1 h: 14 timeouts, the declined card, one success; due-to-done 60 s each
        # for the timeouts (run_at one minute before the failure).
        assert (sum(billing.succeeded), sum(billing.failed)) == (1, 15)
        row = cells(view, "billing\x00charge_card")
        assert row[2:4] == ["1", "15"]
        assert row[5] == f"{15 / 60:.2f}"
        assert billing.latency.p50_ms == 60_500  # (two significant digits: the bucket middle)
        assert cells(view, "emails\x00*")[1] == "(all names)"
        depth = view.query_one("#depth-chart", PlotextPlot)
        assert view.depth is not None and set(view.depth) == {"billing", "emails", "reports"}
        assert "sample(s) recorded" in str(app.screen.query_one("#metrics-info", Static).render())
        assert depth.plt is not None
        assert view.depth_scope == (None, None)
        # On a name's row the depth chart is that name's, in its queue (sampled
        # per queue, name and status).
        view.table.move_cursor(row=keys.index("billing\x00charge_card"))
        await settle(pilot)
        assert view.depth_scope == ("billing", "charge_card")
        assert view.depth is not None and set(view.depth) == {"billing"}
        history = app.history
        assert history is not None
        assert view.depth == history.file.depth(
            view.metrics.since_ms,  # type: ignore[union-attr]
            queue="billing",
            name="charge_card",
        )
        view.table.move_cursor(row=keys.index("emails\x00*"))
        await settle(pilot)
        assert view.depth_scope == (None, None) and set(view.depth) == {
            "billing",
            "emails",
            "reports",
        }
        await pilot.press("w")
        await settle(pilot)
        assert view.window == "6h"
        # 6 h: the first bounced welcome mails (90 and 290 minutes ago) are in.
        assert sum(view.rows["emails\x00send_welcome"].failed) == 2


async def test_metrics_without_history_says_so(tmp_path: Path) -> None:
    app = demo_app(build_triage_db(tmp_path / "t.db"), history=False)
    async with app.run_test(size=SIZE) as pilot:
        view = await open_metrics(pilot)
        assert view.depth is None
        info = str(app.screen.query_one("#metrics-info", Static).render())
        assert "no history file (--no-history)" in info


@pytest.fixture(params=DIALECTS)
async def shared(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Shared]:
    async for s in shared_db(request, tmp_path):
        yield s


@pytest.mark.peer
async def test_metrics_of_tasks_cairnq_finished(shared: Shared) -> None:
    for _ in range(3):
        await shared.succeed("ship", queue="ok")
    await shared.fail("ship", "OSError", "disk full", queue="ok")
    app = console_on(shared)
    async with app.run_test(size=SIZE) as pilot:
        view = await open_metrics(pilot)
        series = view.rows["ok\x00ship"]
        assert (sum(series.succeeded), sum(series.failed)) == (3, 1)
        assert series.latency.count == 4 and series.latency.p99_ms is not None
        assert cells(view, "ok\x00*")[2:4] == ["3", "1"]
