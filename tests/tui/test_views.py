"""Pilot tests of the views against real SQLite databases: what each view shows,
filters and searches, paging, the cursor across refreshes, detail, follow, errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from console_states import DECLINED, NOW, build_demo_db, demo_app, demo_rows, refreshed, settle
from textual.widgets import Input, Select, Static

from cairnq_tui.screens.detail import TaskDetailScreen
from cairnq_tui.widgets.keyed_table import KeyedTable
from cairnq_tui.widgets.keys_view import KeysView
from cairnq_tui.widgets.leases_view import LeasesView
from cairnq_tui.widgets.queues_view import QueuesView
from cairnq_tui.widgets.tasks_view import TasksView
from cairnq_tui.widgets.view_tabs import ViewTabs
from engine import CairnQ, SQLiteStore

SIZE = (160, 50)
ROWS, KEYS = demo_rows()
IDS = {r["name"] + "#" + str(i): r["id"] for i, r in enumerate(ROWS)}


def by_index(i: int) -> str:
    return str(ROWS[i]["id"])


def tasks_view(app: Any) -> TasksView:
    return app.screen.query_one(TasksView)


def shown(table: KeyedTable) -> list[str]:
    return table.row_keys()


def plain_row(table: KeyedTable, key: str) -> list[str]:
    return [str(cell) for cell in table.get_row(key)]


async def test_tasks_view_lists_every_task_newest_first(demo_db: Path) -> None:
    app = demo_app(demo_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table = tasks_view(app).table
        assert shown(table) == sorted((r["id"] for r in ROWS), reverse=True)
        row = plain_row(table, by_index(6))
        assert row[2:8] == ["charge_card", "billing", "failed", "3/3", "0", "invoice-1002"]
        info = str(app.screen.query_one("#tasks-info", Static).render())
        assert f"{len(ROWS)} shown of {len(ROWS)} matching" in info
        bar = app.status_bar()
        assert bar is not None and bar.versions == "protocol v1 · schema v10"


async def test_hostile_text_is_shown_literally(demo_db: Path) -> None:
    app = demo_app(demo_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        row = plain_row(tasks_view(app).table, by_index(8))
        assert row[2] == "[bold]evil[/bold]\\x1b[31m"
        assert row[-2] == "[red]not markup[/red]\\x07"


async def test_status_filter_and_searches(demo_db: Path) -> None:
    app = demo_app(demo_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        view = tasks_view(app)
        view.query_one("#status-filter", Select).value = "running"
        await refreshed(pilot)
        running = sorted((r["id"] for r in ROWS if r["status"] == "running"), reverse=True)
        assert shown(view.table) == running

        view.query_one("#status-filter", Select).clear()
        view.query_one("#search-kind", Select).value = "key"
        await pilot.press("slash", *"invoice-")
        await refreshed(pilot)
        assert shown(view.table) == [KEYS["invoice-1001"], KEYS["invoice-1002"]]

        view.query_one("#search-kind", Select).value = "payload"
        search = view.query_one("#search", Input)
        search.value = '"invoice":1003'
        await refreshed(pilot)
        assert shown(view.table) == [by_index(10)]

        view.query_one("#search-kind", Select).value = "id"
        search.value = by_index(3)[5:18].lower()
        await refreshed(pilot)
        assert shown(view.table) == [by_index(3)]


async def test_queue_filter_from_the_queues_view(demo_db: Path) -> None:
    app = demo_app(demo_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("2")
        await settle(pilot)
        queues = app.screen.query_one(QueuesView)
        assert shown(queues.table) == ["billing", "emails", "reports"]
        row = plain_row(queues.table, "emails")
        assert row[1:6] == ["3", "1", "12", "0", "0"]
        assert row[7] == "1m00s"  # the oldest due task waits since a minute
        queues.table.move_cursor(row=2)
        await pilot.press("enter")
        await refreshed(pilot)
        view = tasks_view(app)
        assert view.filter.queue == "reports"
        assert set(shown(view.table)) == {r["id"] for r in ROWS if r["queue"] == "reports"}


async def test_paging_and_the_cursor_stays_on_its_task(tmp_path: Path) -> None:
    path = build_demo_db(tmp_path / "many.db")
    store = SQLiteStore(path)
    await store.connect()
    for i in range(70):
        await store.submit(name="bulk", payload={"i": i})
    app = demo_app(path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        view = tasks_view(app)
        first = shown(view.table)
        assert len(first) == 50
        view.table.move_cursor(row=4)
        kept = view.table.cursor_key
        for i in range(3):
            await store.submit(name="late", payload={"i": i})
        await refreshed(pilot)
        assert view.table.cursor_key == kept
        assert len(shown(view.table)) == 50 and shown(view.table)[4] != kept

        current = shown(view.table)
        await pilot.press("right_square_bracket")
        await refreshed(pilot)
        second = shown(view.table)
        assert second and max(second) < min(current)
        assert len(current) + len(second) == 23 + 70 + 3
        await pilot.press("left_square_bracket")
        await refreshed(pilot)
        assert len(shown(view.table)) == 50 and not view.page.has_previous  # type: ignore[union-attr]
    await store.close()


async def test_detail_shows_fields_lineage_and_why(demo_db: Path) -> None:
    app = demo_app(demo_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        view = tasks_view(app)
        view.table.move_cursor(row=shown(view.table).index(by_index(4)))
        await pilot.press("enter")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, TaskDetailScreen)
        why = str(screen.query_one("#why", Static).render())
        assert "Cancel requested" in why and "lease held by worker_B" in why
        lineage = str(screen.query_one("#lineage", Static).render())
        assert by_index(9) in lineage and "children (1)" in lineage
        await pilot.press("escape")
        view.table.move_cursor(row=shown(view.table).index(by_index(3)))
        await pilot.press("enter")
        await settle(pilot)
        why = str(app.screen.query_one("#why", Static).render())
        assert "Lease of worker_B expired 8.0s ago: awaiting recovery" in why


async def test_detail_of_a_failed_task_shows_its_error_tree(demo_db: Path) -> None:
    app = demo_app(demo_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.open_task(by_index(6))
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, TaskDetailScreen)
        tree = screen.query_one("#json-error")
        labels = [str(node.label) for node in tree.root.children]
        assert f'type: "{DECLINED["type"]}"' in labels
        why = str(screen.query_one("#why", Static).render())
        assert "failed" in why and "attempt 3 of 3" in why and "declined" in why


async def test_leases_group_by_worker_and_flag_expired(demo_db: Path) -> None:
    app = demo_app(demo_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("3")
        await settle(pilot)
        leases = app.screen.query_one(LeasesView)
        assert shown(leases.table) == [
            "worker:worker_A",
            by_index(2),
            "worker:worker_B",
            by_index(4),
            by_index(3),
        ]
        assert "1 awaiting recovery" in plain_row(leases.table, "worker:worker_B")[1]
        assert plain_row(leases.table, by_index(3))[4].startswith("expired 8.0s ago")
        assert plain_row(leases.table, by_index(2))[4] == "12.0s"


async def test_keys_view_searches_by_prefix(demo_db: Path) -> None:
    app = demo_app(demo_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("4")
        await settle(pilot)
        keys = app.screen.query_one(KeysView)
        assert shown(keys.table) == sorted(KEYS)
        keys.query_one("#key-search", Input).value = "inv"
        await refreshed(pilot)
        assert shown(keys.table) == ["invoice-1001", "invoice-1002"]
        assert plain_row(keys.table, "invoice-1002")[2] == "failed"


async def test_follow_a_key_until_its_task_is_terminal(demo_db: Path) -> None:
    app = demo_app(demo_db)
    store = SQLiteStore(demo_db)
    await store.connect()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("4")
        await settle(pilot)
        keys = app.screen.query_one(KeysView)
        keys.table.move_cursor(row=shown(keys.table).index("signup-ada"))
        await pilot.press("w")
        await pilot.pause(0.5)
        panel = keys.query_one("#follow-panel", Static)
        assert "Following signup-ada" in str(panel.render())
        assert f"resolved to {KEYS['signup-ada']}" in str(panel.render())
        # Another "process" replaces the task under the key, then finishes the new one.
        new = await store.submit(name="send_welcome", key="signup-ada", conflict="replace")
        for _ in range(40):
            await pilot.pause(0.1)
            if f"moved to (replace) {new.id}" in str(panel.render()):
                break
        assert f"moved to (replace) {new.id}" in str(panel.render())
        claimed = await store.claim(queues=["default"], worker_id="w1")
        await store.complete(task_id=claimed[0].id, worker_id="w1", result={"ok": 1})
        for _ in range(40):
            await pilot.pause(0.1)
            if "finished: succeeded" in str(panel.render()):
                break
        assert "finished: succeeded" in str(panel.render())
    await store.close()


async def test_refresh_pauses_for_the_operator_and_for_dialogs(demo_db: Path) -> None:
    app = demo_app(demo_db, refresh_s=0.05)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("p")
        await settle(pilot)
        ticks = app.ticks
        await pilot.pause(0.4)
        assert app.ticks == ticks
        bar = app.status_bar()
        assert bar is not None and "paused" in bar.state
        await pilot.press("p")
        await pilot.pause(0.4)
        assert app.ticks > ticks
        await pilot.press("question_mark")
        await pilot.pause(0.1)
        ticks = app.ticks
        await pilot.pause(0.4)
        assert app.ticks == ticks and "dialog" in bar.state


async def test_a_failing_database_becomes_a_notification(demo_db: Path) -> None:
    app = demo_app(demo_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await app.store.close()
        app.refresh_now(force=True)
        for _ in range(50):
            await pilot.pause(0.02)
            # Shown toasts have no public reader; the app keeps them in _notifications.
            if app._notifications:
                break
        texts = [n.message for n in app._notifications]
        assert any("StoreClosed" in t for t in texts), texts
        bar = app.status_bar()
        assert bar is not None and bar.state.startswith("error")
        assert app.is_running


async def test_command_palette_lists_views_and_actions(demo_db: Path) -> None:
    from cairnq_tui.commands import ConsoleCommands

    app = demo_app(demo_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        titles = [t for t, _, _ in ConsoleCommands(app.screen)._commands()]
        for wanted in [
            "Show the Queues view",
            "Submit",
            "Purge",
            "Cancel (Tasks view)",
            "Follow key (Keys view)",
            "Retry by key…",
        ]:
            assert wanted in titles
        read_only = demo_app(demo_db, read_only=True)
    async with read_only.run_test(size=SIZE) as pilot:
        await settle(pilot)
        titles = [t for t, _, _ in ConsoleCommands(read_only.screen)._commands()]
        assert "Submit" not in titles and "Show the Keys view" in titles
    assert NOW


async def test_a_switch_shows_the_view_then_refreshes_it_once_even_paused(demo_db: Path) -> None:
    app = demo_app(demo_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("p")
        await settle(pilot)
        async with CairnQ.sqlite(str(demo_db)) as client:
            await client.submit("arrived.while.paused", queue="late-queue")
        queues = app.screen.query_one(QueuesView)
        ticks = app.ticks
        await pilot.press("2")
        await settle(pilot)
        assert queues.display and not tasks_view(app).display
        assert app.screen.focused is queues.table
        assert app.ticks == ticks + 1 and "late-queue" in shown(queues.table)
        await pilot.press("2")  # the view shown already: refreshed again, once
        await settle(pilot)
        assert app.ticks == ticks + 2 and app.paused


async def test_a_new_info_line_lays_nothing_out(demo_db: Path) -> None:
    """The views' info lines are one line whatever they say: a new text repaints the
    line without a layout of the whole screen (a selection changes only the line)."""
    app = demo_app(demo_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        info = app.screen.query_one("#tasks-info", Static)
        layouts: list[object] = []
        app.screen.screen_layout_refresh_signal.subscribe(info, layouts.append)
        await pilot.press("space")
        await settle(pilot)
        app.screen.screen_layout_refresh_signal.unsubscribe(info)
        assert "1 selected" in str(info.render())
        assert layouts == []


async def test_queue_option_limits_every_view(demo_db: Path) -> None:
    app = demo_app(demo_db, queues=("emails", "billing"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        wanted = [r["id"] for r in ROWS if r["queue"] in ("emails", "billing")]
        assert shown(tasks_view(app).table) == sorted(wanted, reverse=True)
        app.action_show_view("queues")
        await settle(pilot)
        assert shown(app.screen.query_one(QueuesView).table) == ["billing", "emails"]
        app.action_show_view("leases")
        await settle(pilot)
        assert shown(app.screen.query_one(LeasesView).table) == ["worker:worker_A", by_index(2)]


async def click_tab(pilot: Any, view: str) -> None:
    """Click the middle of ``view``'s name in the tab strip."""
    start, end = pilot.app.screen.query_one(ViewTabs).span_of(view)
    assert end > start, f"no tab for {view!r}"
    await pilot.click(ViewTabs, offset=((start + end) // 2, 0))


async def test_the_mouse_switches_views_and_opens_tasks(demo_db: Path) -> None:
    app = demo_app(demo_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        tabs = app.screen.query_one(ViewTabs)
        await click_tab(pilot, "keys")
        await settle(pilot)
        keys = app.screen.query_one(KeysView)
        assert keys.display and keys.table.row_count == len(KEYS)
        assert not tasks_view(app).display
        # The clicked name is the one highlighted, and the keys go to its table.
        assert tabs.active == "keys" and app.screen.focused is keys.table
        drawn = tabs.render()
        names, bar = drawn.plain.split("\n")
        start, end = tabs.span_of("keys")
        assert names[start:end] == " Keys [4] "

        def style_at(x: int) -> Any:
            return [span.style for span in drawn.spans if span.start <= x < span.end][-1]

        assert style_at(start + 1) == tabs.get_component_rich_style("view-tabs--active")
        assert style_at(0) == tabs.get_component_rich_style("view-tabs--tab")
        underlined = {
            x
            for x in range(len(bar))
            if style_at(len(names) + 1 + x).color
            == (tabs.get_component_rich_style("view-tabs--bar-active").color)
        }
        assert underlined == set(range(start + 1, end - 1))  # under "Keys [4]" only
        queues_at = tabs.span_of("queues")[0] + 2
        await pilot.hover(ViewTabs, offset=(queues_at, 0))
        drawn = tabs.render()
        assert style_at(queues_at) == tabs.get_component_rich_style("view-tabs--hover")
        await pilot.click(ViewTabs, offset=(tabs.span_of("errors")[1] + 5, 0))  # past the names
        await settle(pilot)
        assert tabs.active == "keys" and keys.display
        await click_tab(pilot, "tasks")
        await settle(pilot)
        assert tabs.active == "tasks" and not keys.display
        table = tasks_view(app).table
        assert app.screen.focused is table
        await pilot.click(table, offset=(8, 2))  # the second row (row 0 is the header)
        await pilot.click(table, offset=(8, 2))
        await settle(pilot)
        assert isinstance(app.screen, TaskDetailScreen)
        assert app.screen.task_id == shown(table)[1]


async def test_headroom_shows_with_a_depth_limit(demo_db: Path) -> None:
    app = demo_app(demo_db, max_depth={"emails": 10, "*": 2})
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.action_show_view("queues")
        await settle(pilot)
        table = app.screen.query_one(QueuesView).table
        queued = sum(1 for r in ROWS if r["queue"] == "emails" and r["status"] == "queued")
        assert plain_row(table, "emails")[6] == str(10 - queued)
        assert plain_row(table, "billing")[6] == "1"  # 2 - 1 queued
