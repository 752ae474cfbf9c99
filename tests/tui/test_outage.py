"""A Postgres outage seen by one console through a proxy of the test's own
(``outage_proxy.py``): the console is live again soon after the server is back,
and a write pressed while the connection hangs shows as pending, can be
abandoned, and is never applied silently (issue 20.8)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from console_states import settle
from outage_proxy import OutageProxy

from cairnq_tui.app import ConsoleApp, Settings
from cairnq_tui.screens.confirm import ConfirmScreen
from cairnq_tui.screens.pending import PendingWriteScreen
from cairnq_tui.target import make_store, parse_target
from cairnq_tui.widgets.tasks_view import TasksView
from engine import PostgresStore

SIZE = (160, 50)


@pytest.fixture
async def seed(pg_dsn: str, pg_schema: str) -> AsyncIterator[PostgresStore]:
    """Another process's handle on the schema (straight to the server)."""
    store = PostgresStore(pg_dsn, schema=pg_schema, max_size=2)
    await store.connect()
    for i in range(3):
        await store.submit(name="job", queue="q1", payload={"i": i})
    yield store
    await store.close()


@pytest.fixture
async def proxy(pg_dsn: str) -> AsyncIterator[OutageProxy]:
    found = OutageProxy(pg_dsn)
    yield found
    await found.close()


def console(dsn: str, schema: str) -> ConsoleApp:
    target = parse_target(dsn, schema)
    return ConsoleApp(make_store(target, read_only=False), Settings(target=target, refresh_s=1.0))


async def until(pilot: Any, check: Any, within: float) -> float:
    """Poll ``check()`` until true (or ``within`` seconds); how long it took."""
    started = time.monotonic()
    while not check() and time.monotonic() - started < within:
        await pilot.pause(0.05)
    return time.monotonic() - started


def notes(app: Any) -> list[str]:
    return [n.message for n in app._notifications]


async def test_the_console_is_live_soon_after_an_outage_ends(
    seed: PostgresStore, proxy: OutageProxy, pg_schema: str
) -> None:
    app = console(await proxy.start(), pg_schema)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        bar = app.status_bar()
        assert bar is not None and bar.state.startswith("live")
        proxy.cut()  # the server is gone: every connection dropped, new ones refused
        await until(pilot, lambda: "error" in bar.state, within=30)
        assert "error" in bar.state, bar.state
        await pilot.pause(6)  # long enough for the pool to back off between attempts
        new = await seed.submit(name="late", queue="q1")  # written during the outage
        view = app.screen.query_one(TasksView)
        proxy.restore()
        took = await until(
            pilot,
            lambda: new.id in view.table.row_keys() and bar.state.startswith("live"),
            within=30,
        )
        assert new.id in view.table.row_keys() and bar.state.startswith("live"), bar.state
        # Wanted: live within 2 s of the server's return (9 s and more before: a
        # refresh waited out the pool's 10 s timeout). Generous for a loaded machine.
        assert took < 4, took


async def pending_then_abandon(pilot: Any, app: ConsoleApp, task_id: str) -> None:
    """Cancel ``task_id`` from the Tasks view, see it pending, abandon it."""
    view = app.screen.query_one(TasksView)
    view.table.move_cursor(row=view.table.row_keys().index(task_id))
    await pilot.press("c")
    await pilot.pause()
    assert isinstance(app.screen, ConfirmScreen)
    await pilot.press("y")
    await until(pilot, lambda: isinstance(app.screen, PendingWriteScreen), within=30)
    screen = app.screen
    assert isinstance(screen, PendingWriteScreen) and screen.what == "cancel 1 task"
    await pilot.press("escape")
    await pilot.pause()
    assert not isinstance(app.screen, PendingWriteScreen)
    said = next(n for n in notes(app) if n.startswith("Abandoned after"))
    assert "never sent" in said and "may still be applied" in said


async def reported(pilot: Any, app: ConsoleApp) -> str:
    """The report the console makes once the database answers again."""
    await until(
        pilot, lambda: any(n.startswith("After the abandoned write") for n in notes(app)), 60
    )
    return next(n for n in notes(app) if n.startswith("After the abandoned write"))


async def test_a_write_that_never_got_a_connection_is_abandoned_and_never_applied(
    seed: PostgresStore, proxy: OutageProxy, pg_schema: str
) -> None:
    app = console(await proxy.start(), pg_schema)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        task_id = app.screen.query_one(TasksView).table.row_keys()[0]
        proxy.cut()  # the write waits for a connection that does not come
        await pending_then_abandon(pilot, app, task_id)
        await pilot.pause(2)
        proxy.restore()
        report = await reported(pilot, app)
        assert report.endswith("now 1 queued."), report
        await pilot.pause(1)
        after = await seed.get_status(task_id)
        assert after is not None and after.status == "queued"  # never applied later
        # Abandoned: another write may start (it is not refused as still pending).
        task = await seed.get(task_id)
        assert task is not None
        app.controls.cancel_tasks([task])
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)


async def test_a_write_sent_into_a_hung_connection_is_reported_as_it_landed(
    seed: PostgresStore, proxy: OutageProxy, pg_schema: str
) -> None:
    app = console(await proxy.start(), pg_schema)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        task_id = app.screen.query_one(TasksView).table.row_keys()[0]
        proxy.pause()  # the statement is sent, the network holds it
        try:
            await pending_then_abandon(pilot, app, task_id)
        finally:
            proxy.resume()  # held bytes go through: the server may still apply it
        report = await reported(pilot, app)
        after = await seed.get_status(task_id)
        assert after is not None
        # Whatever the server did with the held statement, the report says it.
        assert report.endswith(f"now 1 {after.status}."), (report, after.status)
