"""Pilot tests of the hosted-worker views with a real hosted worker, on SQLite and
Postgres: the lock view (one holder, the waiting names), quotas, in-flight calls,
waits, errors with their traceback, the detail's hosted reasons, and the controls
(pause/resume, drain, restart, concurrency, reload of a broken then fixed module).
"""

from __future__ import annotations

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
from cairnq_tui.screens.detail import TaskDetailScreen
from cairnq_tui.screens.traceback import TracebackScreen
from cairnq_tui.target import Target
from cairnq_tui.widgets.keyed_table import KeyedTable
from engine import CairnQ, PostgresStore, TaskStore

SIZE = (160, 50)

LOCKED = """
import asyncio, threading
from engine import Worker

gate = threading.Event()

def make(store):
    w = Worker(store, ["default"], concurrency=4, poll_interval_ms=20, lease_ms=30_000,
               resources={"gpu": 1})

    async def held(ctx):
        await ctx.progress(0.5, "rendering")
        while not gate.is_set():
            await asyncio.sleep(0.01)
        return "ok"

    w.register("render", held, resource="gpu")
    w.register("compare", held, resource="gpu")

    @w.task("boom")
    async def boom(ctx):
        raise ValueError("kaput")

    @w.task("parent")
    async def parent(ctx):
        child = await ctx.submit("child.wait")
        return (await ctx.wait(child.id, timeout_ms=60_000)).status

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


@pytest.fixture
def hosted(
    modules: UserModules, make_store: Callable[[], TaskStore]
) -> Iterator[tuple[str, WorkerHost, TaskStore]]:
    name = modules.write(LOCKED)
    console_store = make_store()
    host = WorkerHost(
        [f"{name}:make"], make_store=make_store, target_text="unused", reference=console_store
    )
    host.start()
    yield name, host, console_store
    modules.module(name).gate.set()
    host.shutdown(1.0)


def console(store: TaskStore, host: WorkerHost) -> ConsoleApp:
    if isinstance(store, PostgresStore):
        target = Target("postgres://test", "postgres", "postgres://test")
    else:
        target = Target(store.target, "sqlite", "tasks.db")
    return ConsoleApp(store, Settings(target=target, refresh_s=3600.0), host=host)


def cells(table: KeyedTable, key: str) -> list[str]:
    return [str(c) for c in table.get_row(key)]


def strip(app: Any) -> str:
    view = app.screen.active_view()
    return str(view.query_one(".hosted-workers", Static).render())


async def until(pilot: Any, check: Callable[[], bool], what: str, timeout_s: float = 10.0) -> None:
    """Refresh the visible view until ``check()`` holds (generous deadline)."""
    deadline = time.monotonic() + timeout_s
    while True:
        pilot.app.refresh_now(force=True)
        await settle(pilot)
        if check():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")


async def test_lock_quotas_calls_waits_and_errors_show_the_hosted_worker(
    hosted: tuple[str, WorkerHost, TaskStore], make_store: Callable[[], TaskStore]
) -> None:
    name, host, store = hosted
    spec = f"{name}:make"
    async with CairnQ(make_store()) as client:
        for task_name in ("render", "compare", "render", "compare"):
            await client.submit(task_name)
        boom = await client.submit("boom", max_attempts=1)
        await client.submit("parent")
        app = console(store, host)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)

            # Resources: capacity 1 is a lock, one holder, and both names wait on it.
            await pilot.press("7")
            table = app.screen.query_one("#resources-table", KeyedTable)

            def lock_view() -> bool:
                keys = table.row_keys()
                waiting = {cells(table, k)[2] for k in keys if "/wait/" in k}
                return f"{spec}/gpu" in keys and waiting == {"render", "compare"}

            await until(pilot, lock_view, "one gpu holder and two waiting names")
            keys = table.row_keys()
            assert cells(table, f"{spec}/gpu")[:2] == ["gpu (lock)", "1/1"]
            holders = [k for k in keys if k.startswith(f"{spec}/gpu/call/")]
            assert len(holders) == 1
            assert cells(table, holders[0])[2] in {"render", "compare"}
            assert "running" in strip(app)

            # Quotas: the gpu names are held back by their saturated resource.
            await pilot.press("6")
            quotas = app.screen.query_one("#quotas-table", KeyedTable)
            await until(
                pilot,
                lambda: (
                    cells(quotas, f"{spec}/compare")[9] == "resource saturated"
                    or cells(quotas, f"{spec}/render")[9] == "resource saturated"
                ),
                "a gpu name held back by its resource",
            )
            assert cells(quotas, f"{spec}/render")[3] == "gpu"

            # Calls: the gpu holder, with the progress its handler reported.
            await pilot.press("8")
            calls = app.screen.query_one("#calls-table", KeyedTable)
            await until(
                pilot,
                lambda: any(cells(calls, k)[1] in {"render", "compare"} for k in calls.row_keys()),
                "the gpu call in flight",
            )
            gpu_call = next(
                k for k in calls.row_keys() if cells(calls, k)[1] in {"render", "compare"}
            )
            assert "50%" in cells(calls, gpu_call)[7] and cells(calls, gpu_call)[8] == "rendering"

            # Waits: the parent handler's ctx.wait on its child.
            await pilot.press("5")
            waits = app.screen.query_one("#waits-table", KeyedTable)
            await until(
                pilot,
                lambda: any(cells(waits, k)[1] == "ctx.wait" for k in waits.row_keys()),
                "the handler's ctx.wait",
            )

            # Errors: the failure, and its traceback on demand.
            await pilot.press("9")
            errors = app.screen.query_one("#errors-table", KeyedTable)
            await until(pilot, lambda: errors.row_count > 0, "the boom failure")
            row = cells(errors, errors.row_keys()[0])
            assert row[2:5] == ["failure", "handler boom", boom.id]
            assert row[5] == "ValueError: kaput"
            errors.focus()
            await pilot.press("enter")
            await settle(pilot)
            assert isinstance(app.screen, TracebackScreen)
            text = " ".join(str(s.render()) for s in app.screen.query(Static))
            assert 'raise ValueError("kaput")' in text
            await pilot.press("escape")

            # The detail of a waiting gpu task says what holds the resource.
            queued = await client.list(status="queued", name="compare", limit=5)
            queued = queued or await client.list(status="queued", name="render", limit=5)
            app.open_task(queued[0].id)
            await settle(pilot)
            assert isinstance(app.screen, TaskDetailScreen)
            await until(
                pilot,
                lambda: (
                    "Blocked on resource gpu (held by" in str(app.screen.query_one("#why").render())
                ),
                "the hosted reason in the detail",
            )


async def test_controls_pause_drain_restart_and_concurrency(
    hosted: tuple[str, WorkerHost, TaskStore],
) -> None:
    _, host, store = hosted
    app = console(store, host)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("6")
        await until(pilot, lambda: "running" in strip(app), "running")
        await pilot.press("z")
        await until(pilot, lambda: "paused" in strip(app), "paused")
        await pilot.press("z")
        await until(pilot, lambda: "running" in strip(app), "running again")
        await pilot.press("plus")
        await until(pilot, lambda: "calls 0/5" in strip(app), "concurrency 5")
        await pilot.press("minus", "minus")
        await until(pilot, lambda: "calls 0/3" in strip(app), "concurrency 3")
        await pilot.press("D")
        await until(pilot, lambda: "stopped" in strip(app), "drained and stopped")
        await pilot.press("S")
        await until(pilot, lambda: "running" in strip(app), "restarted")


async def test_reload_reports_a_broken_module_and_recovers(
    hosted: tuple[str, WorkerHost, TaskStore], modules: UserModules
) -> None:
    name, host, store = hosted
    app = console(store, host)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("6")
        modules.write(LOCKED.replace("def make(store):", "def make(store):\n    1 / 0"), name)
        await pilot.press("L")
        await until(pilot, lambda: "failed" in strip(app), "the failed reload")
        assert "ZeroDivisionError: division by zero" in strip(app)
        assert f"{name}.py, line 8" in strip(app)
        assert app.is_running  # the console goes on
        modules.write(LOCKED.replace('"compare"', '"compare2"'), name)
        await pilot.press("L")
        quotas = app.screen.query_one("#quotas-table", KeyedTable)
        await until(pilot, lambda: f"{name}:make/compare2" in quotas.row_keys(), "the fixed module")
        assert "running" in strip(app) and "Error" not in strip(app)
