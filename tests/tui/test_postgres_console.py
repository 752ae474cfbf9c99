"""The console on Postgres: views, a control, read-only sessions, and NOTIFY from
another connection triggering an early refresh (with polling set to an hour).

Views are switched with ``action_show_view`` rather than key presses: with a
Postgres store open, Pilot's wait-for-idle after each press often runs to its
2 s ceiling, and the keys themselves are covered by the SQLite tests.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest
from console_states import settle
from textual.widgets import Static

from cairnq_tui.app import ConsoleApp, Settings
from cairnq_tui.screens.confirm import ConfirmScreen
from cairnq_tui.target import make_store, parse_target
from cairnq_tui.widgets.keys_view import KeysView
from cairnq_tui.widgets.leases_view import LeasesView
from cairnq_tui.widgets.tasks_view import TasksView
from engine import PostgresStore, StoreUnavailable

SIZE = (160, 50)


@pytest.fixture
async def pg(pg_dsn: str, pg_schema: str) -> AsyncIterator[PostgresStore]:
    """Another process's handle on a fresh schema, with a few tasks in it."""
    store = PostgresStore(pg_dsn, schema=pg_schema)
    await store.connect()
    for i in range(6):
        await store.submit(name="pg.job", queue="pgq", payload={"i": i}, key=f"pg-{i}")
    await store.claim(queues=["pgq"], worker_id="worker_pg", limit=2)
    yield store
    await store.close()


def console(
    pg_dsn: str, schema: str, *, read_only: bool = False, refresh_s: float = 3600
) -> ConsoleApp:
    target = parse_target(pg_dsn, schema)
    store = make_store(target, read_only=read_only)
    return ConsoleApp(store, Settings(target=target, read_only=read_only, refresh_s=refresh_s))


async def test_views_and_a_cancel_on_postgres(
    pg: PostgresStore, pg_dsn: str, pg_schema: str
) -> None:
    app = console(pg_dsn, pg_schema)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        view = app.screen.query_one(TasksView)
        listed = await pg.list(limit=100)
        assert view.table.row_keys() == sorted((t.id for t in listed), reverse=True)
        bar = app.status_bar()
        assert bar is not None and bar.dialect == "postgres" and "schema v10" in bar.versions
        app.action_show_view("leases")
        await settle(pilot)
        assert app.screen.query_one(LeasesView).table.row_keys()[0] == "worker:worker_pg"
        app.action_show_view("keys")
        await settle(pilot)
        assert app.screen.query_one(KeysView).table.row_keys() == [f"pg-{i}" for i in range(6)]

        app.action_show_view("tasks")
        await settle(pilot)
        queued = next(t for t in listed if t.status == "queued")
        view.table.move_cursor(row=view.table.row_keys().index(queued.id))
        await pilot.press("c")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        await settle(pilot)
        task = await pg.get(queued.id)
        assert task is not None and task.status == "canceled"


async def test_notify_refreshes_early(pg: PostgresStore, pg_dsn: str, pg_schema: str) -> None:
    app = console(pg_dsn, pg_schema)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        view = app.screen.query_one(TasksView)
        before = len(view.table.row_keys())
        new = await pg.submit(name="pg.late", queue="pgq")  # NOTIFY cairnq_queued
        for _ in range(100):
            await pilot.pause(0.05)
            if new.id in view.table.row_keys():
                break
        assert new.id in view.table.row_keys() and len(view.table.row_keys()) == before + 1


async def test_read_only_session_on_postgres(
    pg: PostgresStore, pg_dsn: str, pg_schema: str
) -> None:
    app = console(pg_dsn, pg_schema, read_only=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        for action in ("submit", "purge"):
            await app.run_action(action)
        app.screen.query_one(TasksView).action_cancel()
        await pilot.pause()
        assert not app.dialog_open
        bar = app.status_bar()
        assert bar is not None and bar.read_only
        info: Any = app.screen.query_one("#tasks-info", Static)
        assert "7 shown" not in str(info.render()) and "6 shown of 6 matching" in str(info.render())
        with pytest.raises(StoreUnavailable):
            await app.client.cancel((await pg.list(limit=1))[0].id)


async def test_reconnects_after_the_server_drops_its_connections(
    pg: PostgresStore, pg_dsn: str, pg_schema: str
) -> None:
    name = "cq_console_" + uuid.uuid4().hex[:8]
    dsn = pg_dsn + ("&" if "?" in pg_dsn else "?") + f"application_name={name}"
    app = console(dsn, pg_schema)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        # Only this console's sessions (its application_name): other tests share the server.
        with psycopg.connect(pg_dsn, autocommit=True) as admin:
            killed = admin.execute(
                "select count(pg_terminate_backend(pid)) from pg_stat_activity"
                " where application_name = %s",
                (name,),
            ).fetchone()
        assert killed is not None and killed[0] >= 1
        new = await pg.submit(name="after.drop", queue="pgq")
        view = app.screen.query_one(TasksView)
        for _ in range(20):
            app.refresh_now(force=True)
            await settle(pilot)
            if new.id in view.table.row_keys():
                break
        assert new.id in view.table.row_keys()
        bar = app.status_bar()
        assert bar is not None and bar.state.startswith("live")
