"""Defects operators found in the console (issue 13), each pinned by a test on a real
database: SQLite, and Postgres where the defect touches the database."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from console_states import demo_app, fill_submit, refreshed, settle
from textual.widgets import Input, Select, Static

from cairnq_tui.app import ConsoleApp, Settings
from cairnq_tui.target import make_store, parse_target
from cairnq_tui.widgets.tasks_view import TasksView
from engine import SQLiteStore, TaskStore

SIZE = (160, 50)

MakeApp = Callable[..., ConsoleApp]


@pytest.fixture(params=["sqlite", "postgres"])
async def on_both(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[TaskStore, MakeApp]]:
    """Another process's store on a fresh database with a few tasks, and a console maker."""
    if request.param == "sqlite":
        raw, schema = str(tmp_path / "t.db"), None
        store: TaskStore = SQLiteStore(raw)
    else:
        raw = request.getfixturevalue("pg_dsn")
        schema = request.getfixturevalue("pg_schema")
        from engine import PostgresStore

        store = PostgresStore(raw, schema=schema, max_size=2)
    await store.connect()
    for i in range(4):
        await store.submit(name="job", queue="q1", payload={"i": i}, key=f"k-{i}")

    def make(**settings: Any) -> ConsoleApp:
        target = parse_target(raw, schema)
        options: dict[str, Any] = {"refresh_s": 3600.0, **settings}
        return ConsoleApp(make_store(target, read_only=False), Settings(target=target, **options))

    yield store, make
    await store.close()


async def on_key_row(pilot: Any, key: str) -> Any:
    """The Keys view, its cursor on ``key``."""
    from cairnq_tui.widgets.keys_view import KeysView

    await pilot.press("4")
    await settle(pilot)
    keys = pilot.app.screen.query_one(KeysView)
    keys.table.move_cursor(row=keys.table.row_keys().index(key))
    return keys


def errors_shown(app: ConsoleApp) -> list[str]:
    return [n.message for n in app._notifications if n.severity == "error"]


async def test_an_empty_key_or_payload_search_is_no_filter(
    on_both: tuple[TaskStore, MakeApp],
) -> None:
    store, make = on_both
    ids = sorted((t.id for t in await store.list(limit=100)), reverse=True)
    app = make()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        view = app.screen.query_one(TasksView)
        for kind in ("key", "payload", "id"):
            view.query_one("#search-kind", Select).value = kind
            view.query_one("#search", Input).value = ""
            await refreshed(pilot)
            await refreshed(pilot)  # and the refresh after that still works
            assert view.table.row_keys() == ids, kind
            assert errors_shown(app) == [], kind
        # A key search, then clearing it: back to every task.
        view.query_one("#search-kind", Select).value = "key"
        view.query_one("#search", Input).value = "k-1"
        await refreshed(pilot)
        assert len(view.table.row_keys()) == 1
        view.query_one("#search", Input).value = ""
        await refreshed(pilot)
        assert view.table.row_keys() == ids and errors_shown(app) == []
        bar = app.status_bar()
        assert bar is not None and not bar.state.startswith("error")


async def fire_everything(app: ConsoleApp, pilot: Any) -> None:
    """Every refresh trigger and data message the console can receive, at once."""
    from cairnq_tui.messages import DatabaseWoke, StoreConnected, TasksRefreshed
    from engine.inspection import CappedCount, TaskPage

    view = (
        next(iter(app.screen_stack[1].query(TasksView)), None)
        if len(app.screen_stack) > 1
        else None
    )
    page = TaskPage(
        rows=(), order="id", has_previous=False, has_next=False, total=CappedCount(0, 10)
    )
    for _ in range(3):
        app.refresh_now(force=True)
        app.post_message(DatabaseWoke("queued"))
        app.post_message(
            StoreConnected(meta={"protocol_version": "1"}, names=["job"], queues=["q1"])
        )
        if view is not None:
            view.post_message(TasksRefreshed(1.0, view.generation, page))
        app.action_refresh_now()
        await pilot.pause(0.05)


async def test_no_refresh_or_message_crashes_whatever_screen_is_up(tmp_path: Path) -> None:
    from cairnq_tui.screens.help import HelpScreen
    from cairnq_tui.screens.main import MainScreen
    from cairnq_tui.widgets.status_bar import StatusBar

    path = tmp_path / "t.db"
    store = SQLiteStore(path)
    await store.connect()
    task = await store.submit(name="job", queue="q1")
    await store.close()
    target = parse_target(str(path))
    app = ConsoleApp(make_store(target, read_only=False), Settings(target=target, refresh_s=0.05))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        for open_screen in (
            lambda: app.push_screen(HelpScreen(read_only=False)),
            app.action_submit,
            app.action_purge,
            lambda: app.open_task(task.id),
        ):
            open_screen()
            await pilot.pause(0.1)
            assert not isinstance(app.screen, MainScreen)
            await fire_everything(app, pilot)
            assert app.is_running
            while len(app.screen_stack) > 2:
                app.pop_screen()
            await pilot.pause(0.05)
            if not isinstance(app.screen, MainScreen):
                app.pop_screen()
            await settle(pilot)
        # The main screen without its status bar (as while it is composed or torn down).
        main = app.screen
        assert isinstance(main, MainScreen)
        await main.query_one(StatusBar).remove()
        await fire_everything(app, pilot)
        await pilot.pause(0.2)
        assert app.is_running and app.status_bar() is None
    assert app.return_code in (None, 0)


# -- dialogs ---------------------------------------------------------------------------


@pytest.fixture
async def db(demo_db: Path) -> AsyncIterator[SQLiteStore]:
    """A second handle on the demo database: what another process would see."""
    store = SQLiteStore(demo_db)
    await store.connect()
    yield store
    await store.close()


def dialog_body(app: ConsoleApp) -> str:
    from textual.widgets import Static

    from cairnq_tui.screens.confirm import ConfirmScreen

    assert isinstance(app.screen, ConfirmScreen), app.screen
    return str(app.screen.query_one(".dialog-body", Static).render())


async def test_back_on_the_submit_confirmation_returns_to_the_filled_form(
    demo_db: Path, db: SQLiteStore
) -> None:
    from textual.widgets import TextArea

    from cairnq_tui.screens.submit import SubmitScreen

    app = demo_app(demo_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("n")
        await pilot.pause()
        form = await fill_submit(
            pilot, name="send_welcome", payload='{"user": "zoe"}', key="signup-zoe"
        )
        form.query_one("#priority", Input).value = "7"
        form.query_one("#delay", Input).value = "90s"
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert "signup-zoe" in dialog_body(app)
        await pilot.press("escape")  # Back
        await settle(pilot)
        again = app.screen
        assert isinstance(again, SubmitScreen)
        assert again.query_one("#name", Input).value == "send_welcome"
        assert '"user": "zoe"' in again.query_one("#payload", TextArea).text
        assert again.query_one("#key", Input).value == "signup-zoe"
        assert again.query_one("#priority", Input).value == "7"
        request = again.validate()
        assert request is not None and request.delay_ms == 90_000
        # A delay without its unit is refused inline (it once meant milliseconds).
        again.query_one("#delay", Input).value = "90"
        assert again.validate() is None
        assert "not a duration" in str(again.query_one("#form-error", Static).render())
        assert await db.get_by_key("signup-zoe") is None  # nothing written


def unlabelled(screen: Any) -> list[str]:
    """Ids of the inputs and selects of ``screen`` with no visible label of their own."""
    from textual.widgets import Label

    missing = []
    for widget in [*screen.query(Input), *screen.query(Select)]:
        labels = [w for w in widget.parent.children if isinstance(w, Label)]
        if (
            len(labels) != 1
            or len(widget.parent.query(Input)) + len(widget.parent.query(Select)) != 1
        ):
            missing.append(widget.id)
    return missing


async def test_every_submit_and_purge_field_has_a_label(demo_db: Path, db: SQLiteStore) -> None:
    from textual.widgets import Button, Static

    from cairnq_tui.screens.purge import PurgeScreen

    app = demo_app(demo_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("n")
        await pilot.pause()
        assert unlabelled(app.screen) == []
        await pilot.press("escape")
        await pilot.press("P")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, PurgeScreen)
        assert unlabelled(screen) == []
        screen.query_one("#older", Input).value = ""
        await pilot.pause(0.2)
        await screen.workers.wait_for_complete()
        await pilot.pause()
        said = str(screen.query_one("#preview", Static).render())
        assert "Give a cutoff" in said and "0 means every terminal task" in said
        assert screen.query_one("#purge", Button).disabled


async def test_replace_confirms_against_the_keys_current_task(
    demo_db: Path, db: SQLiteStore
) -> None:
    from cairnq_tui.screens.submit import SubmitScreen

    app = demo_app(demo_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await on_key_row(pilot, "signup-ada")
        await pilot.press("e")
        await settle(pilot)
        assert isinstance(app.screen, SubmitScreen)
        old = app.screen.prefill.replacing
        # Meanwhile another process replaces the task under the key.
        moved = await db.submit(name="send_welcome", key="signup-ada", conflict="replace")
        await pilot.press("ctrl+s")
        await settle(pilot)
        body = dialog_body(app)
        assert "The key moved since this dialog opened" in body
        assert f"{moved.id} (queued) is canceled if still live" in body
        assert f"no longer at {old}" in body


async def test_rejected_already_exists_names_the_task_holding_the_key(
    demo_db: Path, db: SQLiteStore
) -> None:

    app = demo_app(demo_db)
    holder = await db.get_by_key("invoice-1001")
    assert holder is not None
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("n")
        await pilot.pause()
        await fill_submit(pilot, name="x", payload="{}", key="invoice-1001", conflict="reject")
        await pilot.press("ctrl+s")
        await settle(pilot)
        await pilot.press("y")
        await settle(pilot)
        said = [n.message for n in app._notifications if "AlreadyExists" in n.message]
        assert said and f"already holds task {holder.id} ({holder.status})" in said[0]


# -- escapes ---------------------------------------------------------------------------

HOSTILE = {
    "esc": ("\x1b[31m", "\\x1b[31m"),
    "zwsp": ("acct-1\u200b", "acct-1\\u200b"),
    "bom": ("\ufeffbom", "\\ufeffbom"),
    "rlo": ("invoice-\u202efdp.exe", "invoice-\\u202efdp.exe"),
    "isolate": ("a\u2066b\u2069", "a\\u2066b\\u2069"),
    "zwj": ("fam-\U0001f468\u200d\U0001f469", "fam-\U0001f468\\u200d\U0001f469"),
    "vs16": ("love-\u2764\ufe0f", "love-\u2764\\ufe0f"),
    "nbsp": ("a\u00a0b", "a\\xa0b"),
}


def test_one_escape_for_every_invisible_character() -> None:
    from rich.cells import cell_len

    from cairnq_tui.formatting import clean, safe_text

    for raw, shown in HOSTILE.values():
        assert clean(raw) == shown
    assert clean("plain ✓ 日本 \U0001f600") == "plain ✓ 日本 \U0001f600"
    assert clean("two\nlines\t") == "two⏎lines\\x09"
    cut = safe_text("日本語のキー" * 5, limit=9)
    assert cell_len(cut.plain) <= 9 and cut.plain.endswith("…")


async def test_escapes_are_the_same_in_table_tree_detail_and_keys(tmp_path: Path) -> None:
    from rich.cells import cell_len
    from textual.widgets import Static

    from cairnq_tui.screens.detail import TaskDetailScreen
    from cairnq_tui.widgets.keys_view import KeysView

    path = tmp_path / "t.db"
    store = SQLiteStore(path)
    await store.connect()
    ids = {}
    for label, (raw, _) in HOSTILE.items():
        task = await store.submit(
            name=f"n-{raw}", queue="q", payload={"text": raw, raw: 1}, key=f"k-{raw}"
        )
        ids[label] = task.id
    await store.submit(name="plain", queue="q")
    await store.close()
    target = parse_target(str(path))
    app = ConsoleApp(make_store(target, read_only=False), Settings(target=target, refresh_s=3600))
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot)
        view = app.screen.query_one(TasksView)
        table = view.table
        for label, (_, shown) in HOSTILE.items():
            cells = [str(c) for c in table.get_row(ids[label])]
            assert cells[2] == f"n-{shown}" and cells[7].startswith("k-"), cells
        # Every row's Queue column starts at the same cell, emoji or not.
        starts = set()
        for y in range(len(table.row_keys())):
            line = table.render_line(y + 1).text
            starts.add(cell_len(line[: line.index(" q ")]))
        assert len(starts) == 1, starts

        app.open_task(ids["esc"])
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, TaskDetailScreen)
        labels = [str(node.label) for node in screen.query_one("#json-payload").root.children]
        assert 'text: "\\x1b[31m"' in labels, labels  # one backslash, as in the table
        assert "\\x1b[31m: 1" in labels, labels
        assert "n-\\x1b[31m" in str(screen.query_one("#detail-title", Static).render())
        await pilot.press("escape")
        await pilot.press("4")
        await settle(pilot)
        keys = app.screen.query_one(KeysView)
        shown_keys = [str(keys.table.get_row(k)[0]) for k in keys.table.row_keys()]
        assert "k-acct-1\\u200b" in shown_keys and "k-invoice-\\u202efdp.exe" in shown_keys


# -- layout ----------------------------------------------------------------------------


async def test_the_search_kind_selector_fits_payload_text(demo_db: Path) -> None:
    from rich.cells import cell_len
    from textual.widgets import Static

    app = demo_app(demo_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        select = app.screen.query_one("#search-kind", Select)
        select.value = "payload"
        await settle(pilot)
        label = select.query_one("SelectCurrent Static#label", Static)
        assert label.content_size.width >= cell_len("payload text")
        assert str(label.render()) == "payload text"


async def test_help_keys_are_a_narrow_column_and_the_palette_lists_each_command_once(
    demo_db: Path,
) -> None:
    from rich.console import Console
    from textual.widgets import Static

    from cairnq_tui.commands import ConsoleCommands
    from cairnq_tui.screens.help import HelpScreen

    app = demo_app(demo_db, read_only=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, HelpScreen)
        body = list(screen.query(Static))[-1]
        width = body.content_size.width
        console = Console(width=width, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
        console.print(body.content)
        lines = console.export_text().splitlines()
        quit_line = next(line for line in lines if "Quit" in line)
        assert quit_line.index("Quit") <= 12, quit_line  # the key column fits its keys
        assert any("Cancel all (disabled: read-only)" in line for line in lines), lines
        assert any(line.startswith("Hosted worker views") for line in lines)
        await pilot.press("escape")

        provider = ConsoleCommands(app.screen)
        ours = [title for title, _, _ in provider._commands()]
        system = [c.title for c in app.get_system_commands(app.screen)]
        titles = [t.lower() for t in ours + system]
        assert len(titles) == len(set(titles)), sorted(titles)
        assert "quit" in titles


async def test_tab_in_the_submit_name_field_completes_then_moves_on(tmp_path: Path) -> None:
    from textual.widgets import TextArea

    from cairnq_tui.screens.submit import SubmitScreen

    path = tmp_path / "t.db"
    store = SQLiteStore(path)
    await store.connect()
    for name in ("send_welcome", "send_welcome_v2", "charge_card"):
        await store.submit(name=name)
    await store.close()
    target = parse_target(str(path))
    app = ConsoleApp(make_store(target, read_only=False), Settings(target=target, refresh_s=3600))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        for typed, expected in (
            ("send_welcome", "send_welcome"),  # a known name that prefixes a longer one
            ("send_w", "send_welcome"),
            ("cha", "charge_card"),
            ("brand_new", "brand_new"),
        ):
            await pilot.press("n")
            await pilot.pause()
            screen = app.screen
            assert isinstance(screen, SubmitScreen)
            await pilot.press(*typed, "tab")  # no pause: Tab right behind the typing
            await pilot.pause()
            assert screen.query_one("#name", Input).value == expected
            assert isinstance(screen.focused, TextArea), screen.focused
            await pilot.press("escape")
            await pilot.pause()


async def test_the_follow_panel_stops_counting_and_shows_the_task_as_it_is_now(
    demo_db: Path, db: SQLiteStore
) -> None:
    from textual.widgets import Static

    app = demo_app(demo_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        keys = await on_key_row(pilot, "signup-ada")
        await pilot.press("w")
        panel = keys.query_one("#follow-panel", Static)
        task = await db.get_by_key("signup-ada")
        assert task is not None
        claimed = await db.claim(queues=[task.queue], worker_id="w1")
        assert [t.id for t in claimed] == [task.id]
        await db.complete(task_id=task.id, worker_id="w1", result={"ok": 1})
        for _ in range(100):
            await pilot.pause(0.05)
            if "finished: succeeded" in str(panel.render()):
                break
        ended = str(panel.render())
        assert "finished: succeeded" in ended, ended
        await pilot.pause(0.5)
        await refreshed(pilot)
        first_line = str(panel.render()).splitlines()[0]
        assert first_line.split(" — ")[0] == ended.splitlines()[0].split(" — ")[0]  # not counting
        assert "now succeeded" in first_line, first_line
        # The key moves on after the follow ended: the panel says where it points now.
        moved = await db.submit(name="send_welcome", key="signup-ada", conflict="replace")
        await refreshed(pilot)
        first_line = str(panel.render()).splitlines()[0]
        assert f"now {moved.id} queued" in first_line, first_line
        assert "finished: succeeded" in first_line


# -- hosted workers ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("state", "said"),
    [("paused", "worker paused"), ("draining", "worker draining"), ("stopped", "worker stopped")],
)
async def test_quotas_say_paused_or_draining_not_nothing_due(
    demo_db: Path, state: str, said: str
) -> None:
    from dataclasses import replace

    from hosted_states import hosted_app

    from cairnq_tui.widgets.keyed_table import KeyedTable

    app = hosted_app(demo_db)
    host: Any = app.host
    # The last poll said "nothing due" (or another shortfall); then the worker stopped claiming.
    snap = host.status.snapshot
    names = tuple(replace(n, shortfall="nothing due") for n in snap.names)
    host.status = replace(host.status, state=state, snapshot=replace(snap, names=names))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("6")
        await settle(pilot)
        table = app.screen.query_one("#quotas-table", KeyedTable)
        whys = {str(table.get_row(k)[9]) for k in table.row_keys()}
        assert whys and all(w.startswith(said) for w in whys), whys
        assert not any("nothing due" in w for w in whys)
        strip = str(app.screen.query_one("#quotas-view .hosted-workers").render())
        if state == "draining":  # what the drain still waits for, by handler name
            calls = len(snap.calls)
            assert f"drain waits for {calls} calls: " in strip and "render ×" in strip, strip
        else:
            assert "drain waits" not in strip


# -- a Postgres that stops answering ------------------------------------------------------


class PausableProxy:
    """A TCP proxy to the test server that can stop passing bytes (and start again),
    so one console sees an outage while the shared server keeps serving others."""

    def __init__(self, host: str, port: int) -> None:
        import asyncio

        self.upstream = (host, port)
        self.flowing = asyncio.Event()
        self.flowing.set()
        self.server: Any = None
        self.tasks: set[Any] = set()

    async def start(self) -> int:
        import asyncio

        self.server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def _accept(self, reader: Any, writer: Any) -> None:
        import asyncio

        up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        for src, dst in ((reader, up_writer), (up_reader, writer)):
            task = asyncio.ensure_future(self._pump(src, dst))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    async def _pump(self, src: Any, dst: Any) -> None:
        try:
            while data := await src.read(65536):
                await self.flowing.wait()  # paused: hold the bytes, answer nothing
                dst.write(data)
                await dst.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            dst.close()

    async def close(self) -> None:
        self.flowing.set()
        for task in list(self.tasks):
            task.cancel()
        if self.server is not None:
            self.server.close()


async def test_a_postgres_outage_shows_within_seconds_and_recovers(
    pg_dsn: str, pg_schema: str
) -> None:
    import time
    from urllib.parse import urlsplit, urlunsplit

    from engine import PostgresStore

    seed = PostgresStore(pg_dsn, schema=pg_schema, max_size=1)
    await seed.connect()
    await seed.submit(name="job", queue="q1")
    parts = urlsplit(pg_dsn)
    proxy = PausableProxy(parts.hostname or "127.0.0.1", parts.port or 5432)
    port = await proxy.start()
    netloc = parts.netloc.rsplit("@", 1)
    host = f"127.0.0.1:{port}"
    dsn = urlunsplit(parts._replace(netloc=f"{netloc[0]}@{host}" if len(netloc) == 2 else host))
    target = parse_target(dsn, pg_schema)
    app = ConsoleApp(make_store(target, read_only=False), Settings(target=target, refresh_s=0.2))
    try:
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            bar = app.status_bar()
            assert bar is not None and bar.state.startswith("live")
            proxy.flowing.clear()  # the server stops answering this console
            paused_at = time.monotonic()
            try:
                while "not answering" not in bar.state and time.monotonic() - paused_at < 10:
                    await pilot.pause(0.05)
                stale = app.screen.query_one(TasksView).table.has_class("-stale")
            finally:
                proxy.flowing.set()  # even on failure: the app must be able to close
            proxy.flowing.clear()
            noticed_s = time.monotonic() - paused_at
            assert "not answering" in bar.state, bar.state
            assert bar.state.startswith("error") and "stale" in bar.state
            # Within 2 s of a refresh overdue, and generous for a loaded machine:
            # the refresh interval (0.2 s) + the slow mark (1 s) + the watch tick.
            assert noticed_s < 6, noticed_s
            assert stale
            new = await seed.submit(name="late", queue="q1")  # written while it was out
            proxy.flowing.set()  # the server is back
            view = app.screen.query_one(TasksView)
            back_at = time.monotonic()
            while time.monotonic() - back_at < 20 and (
                new.id not in view.table.row_keys() or view.table.has_class("-stale")
            ):
                await pilot.pause(0.05)
            assert new.id in view.table.row_keys()
            assert not view.table.has_class("-stale") and bar.state.startswith("live")
    finally:
        await proxy.close()
        await seed.close()


# -- frictions ---------------------------------------------------------------------------


async def test_done_per_minute_is_a_rolling_last_60_seconds(
    on_both: tuple[TaskStore, MakeApp],
) -> None:
    from cairnq_tui.widgets.queues_view import QueuesView

    store, make = on_both
    claimed = await store.claim(queues=["q1"], worker_id="w1", limit=3)
    for task in claimed[:2]:
        await store.complete(task_id=task.id, worker_id="w1", result=None)
    await store.fail(
        task_id=claimed[2].id, worker_id="w1", error={"type": "E", "message": "m"}, retryable=False
    )
    app = make()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.action_show_view("queues")
        await settle(pilot)
        table = app.screen.query_one(QueuesView).table
        row = [str(c) for c in table.get_row("q1")]
        # Done/min and Failed/min: what finished in the last 60 s, right away.
        assert row[9:11] == ["2", "1"], row


async def test_filter_keys_clear_everything_and_queues_drill_down_replaces(
    demo_db: Path,
) -> None:
    from cairnq_tui.widgets.queues_view import QueuesView
    from engine.inspection import TaskFilter

    app = demo_app(demo_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        view = app.screen.query_one(TasksView)
        everything = view.table.row_keys()
        view.query_one("#status-filter", Select).value = "failed"
        await pilot.press("N", *"charge")
        assert app.screen.focused is view.query_one("#name-filter", Input)
        await pilot.press("enter")
        await refreshed(pilot)
        assert view.filter.status == "failed" and view.filter.name == "charge"
        await pilot.press("Q")
        assert app.screen.focused is view.query_one("#queue-filter", Select)
        view.table.focus()
        await pilot.press("x")
        await refreshed(pilot)
        assert view.filter == TaskFilter()
        assert view.query_one("#name-filter", Input).value == ""
        assert view.table.row_keys() == everything

        # Drilling down from Queues shows that queue's tasks, whatever was set before.
        view.query_one("#status-filter", Select).value = "running"
        view.query_one("#search", Input).value = "task_"
        await refreshed(pilot)
        await pilot.press("2")
        await settle(pilot)
        queues = app.screen.query_one(QueuesView)
        queues.table.move_cursor(row=queues.table.row_keys().index("emails"))
        await pilot.press("enter")
        await refreshed(pilot)
        assert view.filter == TaskFilter(queue="emails")
        assert view.query_one("#status-filter", Select).is_blank()
        assert view.query_one("#search", Input).value == ""


async def test_a_disabled_key_in_read_only_mode_says_why(demo_db: Path) -> None:
    app = demo_app(demo_db, read_only=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        for key in ("c", "n", "P"):
            await pilot.press(key)
            await pilot.pause()
        said = [n.message for n in app._notifications]
        assert len(said) == 3 and all("--read-only" in m for m in said), said
        assert said[0].startswith("Cancel is disabled") and not app.dialog_open
        await pilot.press("1")  # a key that is not a control says nothing
        await pilot.pause()
        assert len(app._notifications) == 3


async def test_the_table_shows_a_short_worker_id_and_the_detail_the_full_one(
    tmp_path: Path,
) -> None:
    import io

    from rich.console import Console
    from textual.widgets import Static

    path = tmp_path / "t.db"
    store = SQLiteStore(path)
    await store.connect()
    task = await store.submit(name="job", queue="q1")
    worker = "worker_01KDSTILL0000000000000XYZ9"
    await store.claim(queues=["q1"], worker_id=worker)
    await store.close()
    target = parse_target(str(path))
    app = ConsoleApp(make_store(target, read_only=False), Settings(target=target, refresh_s=3600))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        cell = str(app.screen.query_one(TasksView).table.get_row(task.id)[11])
        assert cell == "worker_…00XYZ9"
        app.open_task(task.id)
        await settle(pilot)
        fields = app.screen.query_one("#fields", Static)
        console = Console(width=fields.content_size.width, record=True, file=io.StringIO())
        console.print(fields.content)
        assert worker in console.export_text()


async def test_reload_keeps_the_errors_history(demo_db: Path) -> None:
    from dataclasses import replace

    from hosted_states import hosted_app

    from cairnq_tui.widgets.keyed_table import KeyedTable

    app = hosted_app(demo_db)
    host: Any = app.host
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("9")
        await settle(pilot)
        table = app.screen.query_one("#errors-table", KeyedTable)
        before = table.row_keys()
        assert before
        # A reload: the new worker's snapshot starts with no history at all.
        snap = replace(host.status.snapshot, recent_errors=(), recent_failures=())
        host.status = replace(host.status, snapshot=snap, loads=2)
        await refreshed(pilot)
        assert table.row_keys() == before


async def test_columns_can_be_hidden_and_reordered_for_the_session(demo_db: Path) -> None:
    from cairnq_tui.screens.prompt import PromptScreen
    from cairnq_tui.widgets.tasks_view import parse_columns

    app = demo_app(demo_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        view = app.screen.query_one(TasksView)
        task_id = view.table.row_keys()[0]
        await pilot.press("o")
        await pilot.pause()
        prompt = app.screen
        assert isinstance(prompt, PromptScreen)
        field = prompt.query_one(Input)
        assert field.value.startswith("id, name, queue, status")
        field.value = "status, name, id, progress, message"
        await pilot.press("enter")
        await settle(pilot)
        table = view.table
        labels = table.column_labels()
        assert labels == ["", "Status", "Name", "ID", "Progress", "Message"]
        row = [str(c) for c in table.get_row(task_id)]
        assert row[3] == task_id
        # Kept for the session: another view and back, the same columns.
        await pilot.press("2")
        await settle(pilot)
        await pilot.press("1")
        await settle(pilot)
        assert view.table.column_labels()[1] == "Status"
        assert app.task_columns == ["status", "name", "id", "progress", "message"]
        # An unknown column is refused, and nothing changes.
        await pilot.press("o")
        await pilot.pause()
        app.screen.query_one(Input).value = "status, nosuch"
        await pilot.press("enter")
        await settle(pilot)
        assert any("unknown column(s) nosuch" in n.message for n in app._notifications)
        assert app.task_columns == ["status", "name", "id", "progress", "message"]
    for bad in ("", "id, id"):
        with pytest.raises(ValueError):
            parse_columns(bad)


async def test_the_name_filter_matches_substrings(on_both: tuple[TaskStore, MakeApp]) -> None:
    store, make = on_both
    ids: dict[str, list[str]] = {}
    for name in ("charge_card", "recharge", "send_100%", "charge_card"):
        ids.setdefault(name, []).append((await store.submit(name=name, queue="q1")).id)
    app = make()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        view = app.screen.query_one(TasksView)
        name = view.query_one("#name-filter", Input)
        for text, expected in (
            ("charge", ids["charge_card"] + ids["recharge"]),
            ("harge_c", ids["charge_card"]),
            ("%", ids["send_100%"]),  # a LIKE wildcard matches itself only
            ("_1", ids["send_100%"]),
            ("nothing", []),
        ):
            name.value = text
            await refreshed(pilot)
            assert view.table.row_keys() == sorted(expected, reverse=True), text
        name.value = "charge"
        await refreshed(pilot)
        view.table.focus()
        await pilot.press("C")  # two names match: a bulk cancel asks for one
        await pilot.pause()
        assert not app.dialog_open
        assert any("2 task names contain 'charge'" in n.message for n in app._notifications)


async def test_an_id_search_also_finds_the_end_of_an_id(
    on_both: tuple[TaskStore, MakeApp],
) -> None:
    from textual.widgets import Static

    store, make = on_both
    ids = sorted((t.id for t in await store.list(limit=100)), reverse=True)
    wanted = ids[1]
    app = make()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        view = app.screen.query_one(TasksView)
        search = view.query_one("#search", Input)
        for text in (wanted[-8:], wanted[-8:].lower()):
            search.value = text
            await refreshed(pilot)
            assert view.table.row_keys() == [wanted], text
        info = str(view.query_one("#tasks-info", Static).render())
        assert "inside the id" in info
        search.value = wanted[:12]  # a prefix still works as before
        await refreshed(pilot)
        assert wanted in view.table.row_keys()
        search.value = "ZZZZZZZZ"
        await refreshed(pilot)
        assert view.table.row_keys() == [] and errors_shown(app) == []
