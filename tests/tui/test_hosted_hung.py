"""A hosted worker's ``def`` handlers that hang (issue 20.5) and quitting with calls in
flight (issue 24.12), in a real console (Pilot) on SQLite and Postgres.

The worker strip and the Calls view show the threads a worker gave up on; ``q`` with
a hosted call in flight says on screen what the grace means, and the host names
what it abandoned for the line printed on exit.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from console_states import settle
from hosting_support import DIALECTS, UserModules, store_factory
from textual.widgets import Static

from cairnq_tui.app import ConsoleApp, Settings
from cairnq_tui.hosting import WorkerHost
from cairnq_tui.target import Target
from cairnq_tui.widgets.keyed_table import KeyedTable
from engine import CairnQ, PostgresStore, TaskStore

SIZE = (160, 50)

HUNG = """
import threading
from engine import Worker

gate = threading.Event()

def make(store):
    w = Worker(store, ["default"], concurrency=2, poll_interval_ms=20, max_run_ms=1000,
               retry_backoff_ms=0)

    @w.task("stuck")
    def stuck(ctx):
        gate.wait(120)

    @w.task("quick")
    def quick(ctx, payload):
        return payload["n"] + 1

    return w
"""

SLOW = """
import threading
from engine import Worker

gate = threading.Event()
started = threading.Event()

def make(store):
    w = Worker(store, ["default"], poll_interval_ms=20, lease_ms=60_000)

    @w.task("slow")
    def slow(ctx):
        started.set()
        gate.wait(120)

    return w
"""


@pytest.fixture
def modules(tmp_path: Path) -> Iterator[UserModules]:
    folder = tmp_path / "user"
    folder.mkdir()
    found = UserModules(folder)
    yield found
    found.close()


@pytest.fixture(params=DIALECTS)
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], TaskStore]:
    return store_factory(request, tmp_path)


def console(store: TaskStore, host: WorkerHost) -> ConsoleApp:
    if isinstance(store, PostgresStore):
        target = Target("postgres://test", "postgres", "postgres://test")
    else:
        target = Target(store.target, "sqlite", "tasks.db")
    return ConsoleApp(store, Settings(target=target, refresh_s=3600.0), host=host)


def strip(app: Any) -> str:
    return str(app.screen.active_view().query_one(".hosted-workers", Static).render())


async def until(pilot: Any, check: Callable[[], bool], what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        if pilot.app.is_running:
            pilot.app.refresh_now(force=True)
        await settle(pilot)
        if check():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")


async def test_abandoned_threads_show_in_the_strip_and_the_calls_view(
    modules: UserModules, make_store: Callable[[], TaskStore]
) -> None:
    name = modules.write(HUNG)
    store = make_store()
    host = WorkerHost([f"{name}:make"], make_store=make_store, target_text="x", reference=store)
    host.start()
    try:
        async with CairnQ(make_store()) as client:
            stuck = [(await client.submit("stuck", max_attempts=1)).id for _ in range(3)]
            quick = [(await client.submit("quick", {"n": n})).id for n in range(3)]
            app = console(store, host)
            async with app.run_test(size=SIZE) as pilot:
                await settle(pilot)
                await pilot.press("8")
                calls = app.screen.query_one("#calls-table", KeyedTable)

                def three_abandoned() -> bool:
                    keys = [k for k in calls.row_keys() if "/abandoned/" in k]
                    return len(keys) == 3

                await until(pilot, three_abandoned, "three abandoned threads in the Calls view")
                # "ever" counts every thread given up on: on a loaded machine a quick
                # call can also outlive max_run_ms (it is then retried and returns).
                shown = re.search(r"3 abandoned threads still running \((\d+) ever\)", strip(app))
                assert shown is not None, strip(app)
                ever = int(shown.group(1))
                assert ever >= 3
                key = next(k for k in calls.row_keys() if "/abandoned/" in k)
                row = [str(c) for c in calls.get_row(key)]
                assert row[1] == "stuck" and row[2] in stuck
                assert row[6] == "abandoned, still running"
                # The good tasks ran beside them, on threads of their own.
                done = [await client.wait(i, timeout_ms=60_000) for i in quick]
                assert [t.result for t in done] == [1, 2, 3]

                modules.module(name).gate.set()
                await until(pilot, lambda: not calls.row_keys(), "the threads returned")
                after = re.search(r"abandoned threads 0 \((\d+) ever\)", strip(app))
                assert after is not None and int(after.group(1)) >= ever, strip(app)
    finally:
        modules.module(name).gate.set()
        host.shutdown(1.0)


async def test_quit_with_a_hosted_call_in_flight_says_what_happens_to_it(
    modules: UserModules, make_store: Callable[[], TaskStore]
) -> None:
    name = modules.write(SLOW)
    store = make_store()
    host = WorkerHost([f"{name}:make"], make_store=make_store, target_text="x", reference=store)
    host.start()
    try:
        async with CairnQ(make_store()) as client:
            task = await client.submit("slow")
            app = console(store, host)
            async with app.run_test(size=SIZE) as pilot:
                await settle(pilot)
                assert modules.module(name).started.wait(60)
                await pilot.press("q")

                def notices() -> list[str]:
                    # Toasts have no public reader; the app keeps them in _notifications.
                    return [n.message for n in app._notifications if n.title == "Quitting"]

                await until(pilot, lambda: bool(notices()), "the quitting notice")
                (shown,) = notices()
                assert shown.startswith("Waiting up to 3 s for 1 hosted call in flight (slow ×1)")
                assert "stay running until their leases end (lease 1m" in shown
                await until(pilot, lambda: not app.is_running, "the app to exit")
            line = host.left_running_line()
            assert line is not None
            assert line.startswith("cairnq-tui: quit with 1 hosted call still running after")
            assert task.id in line
            assert (await client.get(task.id)).status == "running"  # until its lease ends
    finally:
        modules.module(name).gate.set()
        host.shutdown(1.0)
