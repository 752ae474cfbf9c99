"""SVG snapshots of the triage views on the deterministic triage database (frozen
clock). Update with ``--snapshot-update`` after a deliberate change."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from console_states import SNAPSHOT_SIZE, demo_app, settle
from triage_states import build_triage_db, triage_rows

from cairnq_tui.panels import open_panel


@pytest.fixture
def triage_db(tmp_path: Path) -> Path:
    return build_triage_db(tmp_path / "triage.db")


def opened(panel: str, *keys: str) -> Any:
    async def run_before(pilot: Any) -> None:
        await settle(pilot)
        open_panel(pilot.app, panel)
        await settle(pilot)
        for key in keys:
            await pilot.press(key)
            await settle(pilot)

    return run_before


@pytest.mark.parametrize(
    ("name", "keys"), [("failures", ()), ("failures_7d", ("w",)), ("group", ("enter",))]
)
def test_failures_snapshots(
    snap_compare: Any, triage_db: Path, name: str, keys: tuple[str, ...]
) -> None:
    app = demo_app(triage_db)
    assert snap_compare(app, terminal_size=SNAPSHOT_SIZE, run_before=opened("Failures", *keys))


def test_audit_snapshot(
    snap_compare: Any, triage_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("getpass.getuser", lambda: "oncall")
    app = demo_app(triage_db)

    async def run_before(pilot: Any) -> None:
        await settle(pilot)
        rows, _ = triage_rows()
        await app.client.cancel(rows[0]["id"])
        await app.client.retry(rows[6]["id"], reset_attempt=True)
        await app.client.purge(status="canceled", name="refund")
        open_panel(pilot.app, "Audit")
        await settle(pilot)

    assert snap_compare(app, terminal_size=SNAPSHOT_SIZE, run_before=run_before)


def test_metrics_snapshot(snap_compare: Any, triage_db: Path) -> None:
    app = demo_app(triage_db)
    assert snap_compare(app, terminal_size=SNAPSHOT_SIZE, run_before=opened("Metrics"))


def test_workers_snapshot(snap_compare: Any, triage_db: Path) -> None:
    app = demo_app(triage_db)
    assert snap_compare(app, terminal_size=SNAPSHOT_SIZE, run_before=opened("Workers"))
