"""Pilot tests of issue 24 (the console as a newcomer found it, round two): completion
of names and queues seen since connect, the keys of dialogs in their footer and in
``?``, ``ctrl+r`` while paused, names shown exactly in the "why" line, the cursor
after a filter change and Home/End/g/G, and the payload editor's first keystrokes.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from console_states import demo_app, settle
from hosting_support import DIALECTS, UserModules, store_factory
from rich.console import Console
from textual.widgets import Input, Select, Static, TextArea

from cairnq_tui.app import ConsoleApp, Settings
from cairnq_tui.hosting import WorkerHost
from cairnq_tui.screens.confirm import ConfirmScreen
from cairnq_tui.screens.detail import TaskDetailScreen
from cairnq_tui.screens.help import HelpScreen
from cairnq_tui.screens.main import MainScreen
from cairnq_tui.screens.submit import SubmitScreen, parse_payload
from cairnq_tui.target import Target
from cairnq_tui.widgets.key_footer import KeyFooter
from cairnq_tui.widgets.tasks_view import TasksView
from engine import CairnQ, PostgresStore, TaskStore

SIZE = (160, 50)

#: A hosted worker: ``limited`` (cap 1) and ``iPhone.sync`` (cap 1) held on a gate,
#: ``hosted.only`` on queue ``hq``, which no task in the database has used yet.
GATED = """
import asyncio, threading
from engine import Worker

gate = threading.Event()

def make(store):
    w = Worker(store, ["default", "hq"], concurrency=8, poll_interval_ms=20, lease_ms=30_000)

    async def held(ctx):
        while not gate.is_set():
            await asyncio.sleep(0.01)

    w.register("limited", held, concurrency=1)
    w.register("iPhone.sync", held, concurrency=1)
    w.register("hosted.only", held)
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
    name = modules.write(GATED)
    console_store = make_store()
    host = WorkerHost(
        [f"{name}:make"], make_store=make_store, target_text="unused", reference=console_store
    )
    host.start()
    yield name, host, console_store
    modules.module(name).gate.set()
    host.shutdown(1.0)


def console(store: TaskStore, host: WorkerHost | None = None) -> ConsoleApp:
    if isinstance(store, PostgresStore):
        target = Target("postgres://test", "postgres", "postgres://test")
    else:
        target = Target(store.target, "sqlite", "tasks.db")
    return ConsoleApp(store, Settings(target=target, refresh_s=3600.0), host=host)


def footer_keys(app: Any) -> dict[str, str]:
    """{key as drawn: description} of the footer of the screen on top."""
    return {k.display: k.description for k in app.screen.query_one(KeyFooter).keys}


async def until(pilot: Any, check: Callable[[], bool], what: str, timeout_s: float = 15.0) -> None:
    import time

    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        pilot.app.refresh_now(force=True)
        await settle(pilot)


# -- 24.1: completion knows names and queues seen since connect ----------------------------------


async def test_submit_completes_names_and_queues_seen_since_connect(
    hosted: tuple[str, WorkerHost, TaskStore], make_store: Callable[[], TaskStore]
) -> None:
    _, host, store = hosted
    app = console(store, host)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)  # connected to an empty database: no names, no queues
        assert app.names == []
        async with CairnQ(make_store()) as client:
            # Tasks of names nobody has seen yet, after connect (some mixed with
            # ordinary traffic of a name the hosted worker does not handle).
            await client.submit("limited")
            await client.submit("later.job", queue="later_queue")
            await client.submit("plain")
        app.refresh_now(force=True)  # one refresh
        await settle(pilot)
        for typed, field, expected in (
            ("lim", "name", "limited"),
            ("later.", "name", "later.job"),
            ("hosted.o", "name", "hosted.only"),  # a hosted worker handles it; no task yet
            ("lat", "queue", "later_queue"),
            ("h", "queue", "hq"),  # the hosted worker's queue
            ("plai", "name", "plain"),
        ):
            await pilot.press("n")
            await pilot.pause()
            screen = app.screen
            assert isinstance(screen, SubmitScreen)
            await until(
                pilot,
                lambda s=screen: getattr(s, "completions_read", True),
                "the fresh completions",
            )
            box = screen.query_one(f"#{field}", Input)
            box.focus()
            box.value = ""
            await pilot.press(*typed, "tab")
            await pilot.pause()
            assert box.value == expected, (typed, box.value)
            await pilot.press("escape")
            await pilot.pause()
        # The Tasks view's name filter is offered them too.
        assert {"limited", "later.job", "hosted.only"} <= set(app.names)
        assert {"later_queue", "hq"} <= set(app.known_queues)


# -- 24.2: the keys of dialogs are in their footer and in ? --------------------------------------


async def test_dialogs_show_their_own_keys_in_the_footer_and_in_help(demo_db: Path) -> None:
    app = demo_app(demo_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("c")  # cancel the highlighted task: a confirmation
        await settle(pilot)
        assert isinstance(app.screen, ConfirmScreen)
        keys = footer_keys(app)
        assert keys.get("y") == "Confirm" and keys.get("esc") == "Back", keys
        assert "Pause" not in keys.values() and "Submit" not in keys.values(), keys
        await pilot.press("escape")
        await settle(pilot)

        await pilot.press("n")
        await settle(pilot)
        assert isinstance(app.screen, SubmitScreen)
        keys = footer_keys(app)
        assert keys.get("^s") == "Submit" and keys.get("esc") == "Back", keys
        assert "Pause" not in keys.values() and "Quit" not in keys.values(), keys
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, MainScreen)
        assert "Pause" in footer_keys(app).values()

        await pilot.press("question_mark")
        await settle(pilot)
        assert isinstance(app.screen, HelpScreen)
        body = list(app.screen.query(Static))[-1]
        out = Console(width=body.content_size.width, record=True, file=io.StringIO())
        out.print(body.content)
        text = out.export_text()
        assert "Confirmations" in text and "Confirm" in text
        assert "ctrl+s" in text and "Submit and replace forms" in text
        assert "home/g" in text and "end/G" in text
        assert "once, also while paused" in text
        # The pending dialog's escape (it abandons a write the database has not answered).
        assert "the pending dialog" in text and "Abandon the write" in text
        assert footer_keys(app).get("esc") == "Close"


# -- 24.3: ctrl+r refreshes once while paused ---------------------------------------------------


async def test_ctrl_r_refreshes_once_while_paused(demo_db: Path) -> None:
    app = demo_app(demo_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("p")
        await settle(pilot)
        assert app.paused
        async with CairnQ.sqlite(str(demo_db)) as client:
            fresh = await client.submit("arrived.while.paused")
        ticks = app.ticks
        await pilot.press("ctrl+r")
        await settle(pilot)
        assert app.ticks == ticks + 1
        view = app.screen.query_one(TasksView)
        assert fresh.id in view.table.row_keys()
        assert app.paused and "paused" in (app.status_bar() or Any).state  # type: ignore[union-attr]
        await pilot.pause(0.2)
        assert app.ticks == ticks + 1  # once: the pause holds


# -- 24.6: the "why" line shows names exactly ---------------------------------------------------


async def test_why_line_shows_capped_names_exactly(
    hosted: tuple[str, WorkerHost, TaskStore], make_store: Callable[[], TaskStore]
) -> None:
    _, host, store = hosted
    async with CairnQ(make_store()) as client:
        for name in ("limited", "limited", "iPhone.sync", "iPhone.sync"):
            await client.submit(name)
        app = console(store, host)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            for name in ("limited", "iPhone.sync"):

                async def waiting(name: str = name) -> str:
                    queued = await client.list(status="queued", name=name, limit=1)
                    return queued[0].id if queued else ""

                task_id = ""
                while not task_id:  # one of each runs (cap 1); the other waits
                    task_id = await waiting()
                app.open_task(task_id)
                await settle(pilot)
                assert isinstance(app.screen, TaskDetailScreen)
                await until(
                    pilot,
                    lambda: "concurrency cap" in str(app.screen.query_one("#why").render()),
                    f"the cap of {name}",
                )
                why = str(app.screen.query_one("#why").render())
                assert f"'{name}' is at its concurrency cap (1/1)" in why, why
                assert name[0].upper() + name[1:] not in why, why
                await pilot.press("escape")
                await settle(pilot)


# -- 24.8: the cursor after a filter change, Home/End/g/G ---------------------------------------


async def test_cursor_starts_at_the_top_after_a_filter_change_and_home_end_move_it(
    demo_db: Path,
) -> None:
    app = demo_app(demo_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        view = app.screen.query_one(TasksView)
        table = view.table
        await pilot.press("end")
        await pilot.pause()
        assert table.cursor_row == table.row_count - 1 > 0
        await pilot.press("home")
        await pilot.pause()
        assert table.cursor_row == 0
        await pilot.press("G")
        await pilot.pause()
        assert table.cursor_row == table.row_count - 1
        await pilot.press("g")
        await pilot.pause()
        assert table.cursor_row == 0

        for status in ("succeeded", "queued", "running"):
            table.focus()
            await pilot.press("G")  # the cursor at the bottom of the old rows
            await pilot.pause()
            view.query_one("#status-filter", Select).value = status
            await settle(pilot)
            assert table.row_count > 1
            assert table.cursor_row == 0, (status, table.cursor_row)
            first = table.row_keys()[0]
            await pilot.press("enter")
            await settle(pilot)
            assert isinstance(app.screen, TaskDetailScreen)
            assert app.screen.task_id == first
            await pilot.press("escape")
            await settle(pilot)


# -- 24.9: the payload editor: typing gives what was typed --------------------------------------


async def test_typing_a_payload_replaces_the_empty_default(demo_db: Path) -> None:
    app = demo_app(demo_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("n")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, SubmitScreen)
        await pilot.press(*"send_welcome", "tab")  # to the payload editor
        await pilot.pause()
        editor = screen.query_one("#payload", TextArea)
        assert screen.focused is editor
        await pilot.press(*'{"to":"me"}')
        await pilot.pause()
        assert parse_payload(editor.text) == {"to": "me"}, editor.text
        request = screen.validate()
        assert request is not None and request.payload == {"to": "me"}
        # Left empty, the payload is {} (the placeholder says so).
        editor.text = ""
        await pilot.pause()
        request = screen.validate()
        assert request is not None and request.payload == {}


# -- 24.14: a worker state change shows without waiting for the control or a tick ----------------


async def test_drain_shows_draining_while_its_calls_still_run(
    hosted: tuple[str, WorkerHost, TaskStore], make_store: Callable[[], TaskStore]
) -> None:
    import asyncio
    import time

    name, host, store = hosted
    async with CairnQ(make_store()) as client:
        held = await client.submit("limited")  # its call holds until the gate opens
        app = console(store, host)  # refresh_s=3600: no tick comes to show anything
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            await pilot.press("6")
            await until(pilot, lambda: "calls 1/" in strip(app), "the held call")
            await pilot.press("D")
            deadline = time.monotonic() + 15
            while "draining" not in strip(app) and time.monotonic() < deadline:
                await asyncio.sleep(0.01)  # no refresh asked for: the control shows it
            assert "draining" in strip(app), strip(app)
            task = await client.get(held.id)
            assert task is not None and task.status == "running"  # the drain still waits
            host_module = __import__(name)
            host_module.gate.set()
            await until(pilot, lambda: "stopped" in strip(app), "stopped after the drain")


def strip(app: Any) -> str:
    view = app.screen.active_view()
    return str(view.query_one(".hosted-workers", Static).render())


async def test_a_state_change_the_console_did_not_ask_for_shows_without_a_refresh(
    hosted: tuple[str, WorkerHost, TaskStore],
) -> None:
    import asyncio
    import time

    _, host, store = hosted
    app = console(store, host)  # refresh_s=3600: no tick comes to show anything
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("6")
        await until(pilot, lambda: "running" in strip(app), "the worker running")
        await pilot.press("p")  # paused: not even a database signal refreshes
        await settle(pilot)
        ticks = app.ticks
        hosted_worker = host.workers[0]
        for control, state in ((hosted_worker.pause, "paused"), (hosted_worker.drain, "stopped")):
            await control()  # from outside the console: no control of its own, no refresh
            deadline = time.monotonic() + 15
            while state not in strip(app) and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            assert state in strip(app), strip(app)
        assert app.ticks == ticks  # shown by the pushed change, not by a refresh
