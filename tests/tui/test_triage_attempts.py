"""Attempt history in the task detail (issue 22.6): the row's last error, the
recorder's attempts, a hosted worker's failures, each marked with its source, and
earlier attempts said to be unknown; on cairnq 0.15.1 data, SQLite and Postgres."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from console_states import DECLINED, demo_app, demo_rows, settle
from hosting_support import DIALECTS as HOSTING_DIALECTS
from hosting_support import UserModules, eventually, store_factory
from textual.widgets import Static
from triage_console_support import DIALECTS, Shared, console_on, shared_db

from cairnq_tui.app import ConsoleApp, Settings
from cairnq_tui.history import SeenFailure
from cairnq_tui.hosting import WorkerHost
from cairnq_tui.screens.detail import TaskDetailScreen
from cairnq_tui.target import Target
from engine import CairnQ, PostgresStore, TaskStore

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


FLAKY = """
from engine import Worker

calls = []

def make(store):
    w = Worker(store, ["default"], concurrency=1, poll_interval_ms=20, retry_backoff_ms=0,
               retry_backoff_max_ms=0)

    @w.task("flaky")
    async def flaky(ctx):
        calls.append(ctx.task.attempt)
        if len(calls) == 1:
            raise ValueError("first try fails")
        return "ok"

    return w
"""


@pytest.fixture(params=HOSTING_DIALECTS)
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], TaskStore]:
    return store_factory(request, tmp_path)


async def test_a_hosted_worker_shows_the_attempt_that_failed_before_the_one_that_succeeded(
    tmp_path: Path, make_store: Callable[[], TaskStore]
) -> None:
    folder = tmp_path / "user"
    folder.mkdir()
    modules = UserModules(folder)
    name = modules.write(FLAKY)
    store = make_store()
    host = WorkerHost(
        [f"{name}:make"], make_store=make_store, target_text="unused", reference=store
    )
    host.start()
    try:
        async with CairnQ(make_store()) as client:
            task = await client.submit("flaky", max_attempts=2)

            async def done() -> bool:
                found = await client.get(task.id)
                return found is not None and found.status == "succeeded"

            await eventually(done, what="the flaky task to succeed on its second attempt")
        assert modules.module(name).calls == [1, 2]
        if isinstance(store, PostgresStore):
            target = Target("postgres://test", "postgres", "postgres://test")
        else:
            target = Target(store.target, "sqlite", "tasks.db")
        app = ConsoleApp(store, Settings(target=target, refresh_s=3600.0), host=host)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            app.open_task(task.id)
            await settle(pilot)
            text = attempts(app)
            worker = (await host.statuses())[0].snapshot.worker_id  # type: ignore[union-attr]
            assert "Attempts  (2 of 2 started)" in text
            lines = [line.strip() for line in text.splitlines()[1:]]
            failed = [line for line in lines if "first try fails" in line]
            assert len(failed) == 1, text
            # The worker's report names the attempt that failed; the succeeded row
            # no longer lends it the error it still holds from attempt 1.
            assert failed[0].startswith("attempt 1") and "failed  ValueError" in failed[0]
            assert failed[0].endswith(f"[hosted worker {worker}]")
            assert lines == [failed[0], lines[-1]] and "not known" not in text
            assert lines[-1].startswith("attempt 2") and lines[-1].endswith("succeeded  [row]")
    finally:
        host.shutdown(1.0)
        modules.close()
