"""The history file (issue 22.5, 22.8): where it lives, its modes, its bounds, the
recorder's samples and failures on databases cairnq 0.15.1 wrote (SQLite and
Postgres), the audit trail of writes, and the console keeping it (or not)."""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from console_states import NOW, demo_app, demo_rows, settle
from triage_console_support import DIALECTS, Shared, shared_db

from cairnq_tui.history import (
    AuditedClient,
    Auditor,
    HistoryFile,
    Recorder,
    SeenFailure,
    history_path,
    state_dir,
    target_identity,
)
from cairnq_tui.history._recorder import FINISHED_EVERY_MS
from cairnq_tui.screens.confirm import ConfirmScreen
from cairnq_tui.widgets.tasks_view import TasksView
from engine import SQLiteStore
from engine.inspection import TaskFilter

DAY = 86_400_000


def test_state_dir_follows_xdg_and_falls_back_to_local_state(tmp_path: Path) -> None:
    assert state_dir({"XDG_STATE_HOME": str(tmp_path)}) == tmp_path / "cairnq-tui"
    home = Path.home() / ".local" / "state" / "cairnq-tui"
    assert state_dir({}) == home
    assert state_dir({"XDG_STATE_HOME": "relative/dir"}) == home  # (XDG: absolute only)


def test_file_name_is_a_hash_and_never_holds_a_password(tmp_path: Path) -> None:
    env = {"XDG_STATE_HOME": str(tmp_path)}
    dsn = "postgresql://ops:s3cretpw@db.example:5432/jobs"
    identity = target_identity("postgres", dsn, "cairnq")
    assert "s3cretpw" not in identity and "db.example" in identity
    path = history_path(identity, env)
    assert path.parent == tmp_path / "cairnq-tui"
    assert "s3cretpw" not in str(path) and path.name.startswith("history-")
    # Another password for the same place is the same target, the same file.
    other = target_identity("postgres", dsn.replace("s3cretpw", "other"), "cairnq")
    assert history_path(other, env) == path
    assert history_path(target_identity("postgres", dsn, "other_schema"), env) != path
    # A SQLite target is its absolute path.
    a = target_identity("sqlite", str(tmp_path / "x.db"), None)
    assert a == target_identity("sqlite", str(tmp_path / "." / "x.db"), None)
    history = HistoryFile(path, target=identity)
    try:
        assert b"s3cretpw" not in path.read_bytes()
    finally:
        history.close()


def test_file_is_created_0600_in_a_0700_folder(tmp_path: Path) -> None:
    path = tmp_path / "state" / "cairnq-tui" / "history-x.sqlite3"
    old = os.umask(0o022)
    try:
        history = HistoryFile(path, target="t")
    finally:
        os.umask(old)
    history.record_counts(NOW, [("q", "*", "queued", 3)])
    history.close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no journal left open


def test_prune_bounds_age_and_size(tmp_path: Path) -> None:
    history = HistoryFile(tmp_path / "h.sqlite3", target="t", max_bytes=256 * 1024)
    try:
        history.record_counts(NOW - 8 * DAY, [("q", "*", "queued", 1)])
        history.record_failures(
            NOW - 8 * DAY, [SeenFailure("task_old", 1, "n", "q", "failed", "E", "m", NOW - 8 * DAY)]
        )
        history.record_counts(NOW - DAY, [("q", "*", "queued", 2)])
        assert history.prune(NOW) == 2  # the 8-day-old sample and failure
        assert history.counts() == {"samples": 1, "failures": 0, "audit": 0}
        # A simulated week of samples, far above the size bound.
        for minute in range(3_000):
            at = NOW - DAY + minute * 20_000
            history.record_counts(
                at,
                [
                    (f"queue_{q:02d}", "*", s, minute)
                    for q in range(10)
                    for s in ("queued", "running")
                ],
            )
        assert history.size_bytes() > 256 * 1024
        history.prune(NOW)
        assert history.size_bytes() <= 256 * 1024
        kept = history.depth(0)
        assert kept and max(at for at, _ in kept["queue_00"]) == NOW - DAY + 2_999 * 20_000
    finally:
        history.close()


def test_bad_bounds_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="max_bytes"):
        HistoryFile(tmp_path / "h.sqlite3", target="t", max_bytes=10)
    assert not (tmp_path / "h.sqlite3").exists()


@pytest.fixture(params=DIALECTS)
async def shared(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Shared]:
    async for s in shared_db(request, tmp_path):
        yield s


@pytest.mark.peer
async def test_recorder_samples_counts_and_failures_cairnq_wrote(
    shared: Shared, tmp_path: Path
) -> None:
    first = await shared.fail("charge", "KeyError", "order 42 not found\nline 2")
    retrying = await shared.fail(
        "charge", "TimeoutError", "gave up", retryable=True, max_attempts=3
    )
    await shared.submit("charge", queue="waiting")
    history = HistoryFile(tmp_path / "h.sqlite3", target="t")
    clock_ms = [shared.inspector.clock()]
    recorder = Recorder(shared.inspector, history, lambda: clock_ms[0])
    try:
        assert await recorder.sample() == 1  # the failed task (the retrying one is queued)
        [seen] = history.attempts(first)
        assert (seen.attempt, seen.error_type, seen.message) == (
            1,
            "KeyError",
            "order 42 not found",
        )
        depth = history.depth(0, statuses=("queued",))
        assert depth["waiting"][-1][1] == 1 and depth["retrying"][-1][1] == 1
        assert depth["default"][-1][1] == 0
        # Nothing new: nothing written twice.
        assert await recorder.sample() == 0
        # A retrying task seen in a view is recorded with its attempt.
        page = await shared.inspector.tasks_page(TaskFilter(queue="retrying"))
        recorder.note_rows(page.rows)
        second = await shared.fail("ship", "OSError", "disk full")
        clock_ms[0] += 10_000
        assert await recorder.sample() == 2
        assert [a.error_type for a in history.attempts(retrying)] == ["TimeoutError"]
        assert history.attempts(retrying)[0].status == "queued"
        assert history.attempts(second)[0].error_type == "OSError"
        assert history.counts()["samples"] == 3  # a row per sample
        # Per queue, name and status: the depth of one name in one queue.
        assert history.depth(0, queue="waiting", name="charge")["waiting"][-1][1] == 1
        # Finished tasks are counted every FINISHED_EVERY_MS: the failed ship
        # task is not counted 10 s later, but is once that has passed.
        assert history.depth(0, statuses=("failed",), name="ship") == {}
        clock_ms[0] += FINISHED_EVERY_MS
        await recorder.sample()
        failed = history.depth(0, statuses=("failed",), name="ship")
        assert [n for _, n in failed["default"]] == [1]  # the fourth sample saw it
        # ship: none queued, charted (as 0) where it was seen
        assert [n for _, n in history.depth(0, name="ship")["default"]] == [0]
    finally:
        history.close()


async def test_audited_client_records_every_write(sqlite_path: Path, tmp_path: Path) -> None:
    store = SQLiteStore(sqlite_path)
    await store.connect()
    history = HistoryFile(tmp_path / "h.sqlite3", target="sqlite|/x.db|")
    clock = iter(range(NOW, NOW + 1_000))
    client = AuditedClient(store, Auditor(history, "sqlite|/x.db|", lambda: next(clock)))
    try:
        a = await client.submit("job", {"n": 1}, key="k-1", delay_ms=60_000)
        b = await client.submit("job", {"n": 2})
        # The console submits through submit_outcome; a reuse writes nothing.
        created = await client.submit_outcome("job", {"n": 3}, key="k-2")
        reused = await client.submit_outcome("job", {"n": 3}, key="k-2")
        assert (created.action, reused.action) == ("created", "reused")
        await client.run_now(a.id)
        await client.delay(a.id, 30_000)
        await client.cancel(a.id)
        await client.cancel(a.id)  # no longer live: counted 0
        await client.retry(a.id, reset_attempt=True)
        await client.cancel_by_key("k-1")
        await client.retry_by_key("k-1")
        await client.cancel(b.id)
        # A purge takes what finished strictly before now (§4.10): not a cancel
        # of the same millisecond.
        await asyncio.sleep(0.005)
        purged = await client.purge(status="canceled")
        assert purged == [b.id]
        entries = list(reversed(history.audit_entries()))
        assert [(e.action, e.count) for e in entries] == [
            ("submit", 1),
            ("submit", 1),
            ("submit", 1),
            ("submit", 0),
            ("run now", 1),
            ("delay", 1),
            ("cancel", 1),
            ("cancel", 0),
            ("retry", 1),
            ("cancel", 1),
            ("retry", 1),
            ("cancel", 1),
            ("purge", 1),
        ]
        assert all(e.target == "sqlite|/x.db|" and e.os_user for e in entries)
        assert '"key": "k-1"' in entries[0].detail and a.id in entries[0].detail
        assert '"outcome": "reused"' in entries[3].detail and created.task.id in entries[3].detail
        assert '"delay_ms": 30000' in entries[5].detail
        assert '"status": "canceled"' in entries[-1].detail and b.id in entries[-1].detail
        assert [e.at_ms for e in entries] == sorted(e.at_ms for e in entries)
    finally:
        history.close()
        await store.close()


async def test_console_keeps_a_history_file_and_audits_its_writes(demo_db: Path) -> None:
    app = demo_app(demo_db)
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot)
        history = app.history
        assert history is not None
        assert history.path.parent == Path(os.environ["XDG_STATE_HOME"]) / "cairnq-tui"
        for _ in range(200):  # the first sample runs as the console connects
            if history.file.counts()["samples"]:
                break
            await pilot.pause(0.05)
        assert history.file.counts()["samples"] == 1  # one row per sample
        # The demo's failed charge (the retrying one too, once the Tasks view drew it).
        rows, _ = demo_rows()
        assert [a.error_type for a in history.file.attempts(rows[6]["id"])] == ["CardDeclined"]
        view = app.screen.query_one(TasksView)
        queued = next(r for r in view.page.rows if r.status == "queued")  # type: ignore[union-attr]
        view.table.move_cursor(row=view.table.row_keys().index(queued.id))
        await pilot.press("c")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        await settle(pilot)
        [entry] = history.file.audit_entries()
        assert (entry.action, entry.count) == ("cancel", 1) and queued.id in entry.detail
        path = history.path
    assert app.history is None  # closed on exit
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


async def test_a_sample_follows_a_drawn_tick_once_one_is_due(demo_db: Path) -> None:
    app = demo_app(demo_db)
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot)
        history = app.history
        assert history is not None

        async def samples(expected: int) -> int:
            for _ in range(200):
                if history.file.counts()["samples"] >= expected:
                    break
                await pilot.pause(0.05)
            return history.file.counts()["samples"]

        assert await samples(1) == 1  # the one taken as the console connected
        app.refresh_now(force=True)  # a tick before the next is due: no sample
        await settle(pilot)
        assert history.file.counts()["samples"] == 1
        app._history_due = 0.0  # due: the next drawn tick starts one
        app.refresh_now(force=True)
        await settle(pilot)
        assert await samples(2) == 2
        assert app._history_due > 0.0


async def test_no_history_keeps_no_file(demo_db: Path) -> None:
    app = demo_app(demo_db, history=False)
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot)
        assert app.history is None
    assert not (Path(os.environ["XDG_STATE_HOME"]) / "cairnq-tui").exists()


async def test_audit_view_lists_the_writes_newest_first(
    demo_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from textual.widgets import Static

    from cairnq_tui.panels import open_panel
    from cairnq_tui.widgets.audit_view import AuditView

    monkeypatch.setattr("getpass.getuser", lambda: "oncall")
    app = demo_app(demo_db)
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot)
        view = app.screen.query_one(TasksView)
        queued = [r.id for r in view.page.rows if r.status == "queued"]  # type: ignore[union-attr]
        await app.client.cancel(queued[0])
        await app.client.cancel(queued[1])
        open_panel(app, "Audit")
        await settle(pilot)
        audit = app.screen.query_one(AuditView)
        rows = [[str(c) for c in audit.table.get_row(k)] for k in audit.table.row_keys()]
        assert [r[1:4] for r in rows] == [["oncall", "cancel", "1"], ["oncall", "cancel", "1"]]
        assert queued[1] in rows[0][4] and queued[0] in rows[1][4]
        assert "2 write(s)" in str(app.screen.query_one("#audit-info", Static).render())


async def test_audit_view_says_when_there_is_no_history_file(demo_db: Path) -> None:
    from textual.widgets import Static

    from cairnq_tui.panels import open_panel

    app = demo_app(demo_db, history=False)
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot)
        open_panel(app, "Audit")
        await settle(pilot)
        info = str(app.screen.query_one("#audit-info", Static).render())
        assert "--no-history" in info


def test_launch_takes_no_history() -> None:
    from cairnq_tui.cli import build_parser

    assert build_parser().parse_args(["launch", "--no-history"]).no_history is True
    assert build_parser().parse_args(["launch"]).no_history is False
