"""The Failures view (ctrl+p "Failures"): failed tasks grouped by what went wrong.

One row per group of ``Inspector.failure_groups`` (task name, error type and the
first message line with numbers, hex, uuids and ids masked) over a window of
1 h, 24 h, 7 d or everything retained (``w`` cycles): count, first and last
seen, a sparkline across the window, an example task. ``enter`` lists the
group's tasks; ``r`` / ``c`` retry or cancel the group after the usual
exact-count confirmation; ``x`` opens the example task.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.widgets import Static

from cairnq_tui import keymap
from cairnq_tui.formatting import age, safe_text, short_id, sparkline
from cairnq_tui.messages import DataMessage
from cairnq_tui.widgets.failure_actions import start_group_action
from cairnq_tui.widgets.keyed_table import ColumnSpec, KeyedTable
from cairnq_tui.widgets.view_bases import DataView
from engine.inspection import WINDOWS, FailureGroup, FailureGroups

#: The windows ``w`` cycles through, in order.
WINDOW_ORDER = ("1h", "24h", "7d", "all")
WINDOW_TITLES = {
    "1h": "last hour",
    "24h": "last 24 h",
    "7d": "last 7 days",
    "all": "everything kept",
}
BUCKETS = 30
COLUMNS: list[ColumnSpec] = [
    ("Count", "count"),
    ("Name", "name"),
    ("Error type", "type"),
    ("Message (masked)", "message"),
    ("First seen", "first"),
    ("Last seen", "last"),
    ("Example", "example"),
    ("Window", "spark"),
]


@dataclass
class FailuresRefreshed(DataMessage):
    groups: FailureGroups
    window: str


def group_row_key(group: FailureGroup) -> str:
    return "\x00".join(group.key)


class FailuresView(DataView):
    """Failure groups over a window, most failures first."""

    BINDINGS = keymap.FAILURES

    def __init__(self, window: str = "24h", **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        if window not in WINDOW_ORDER:
            raise ValueError(f"unknown window {window!r}; expected one of {WINDOW_ORDER}")
        self.window = window
        self.groups: FailureGroups | None = None

    def compose(self) -> ComposeResult:
        yield Static("", id="failures-window")
        yield KeyedTable(COLUMNS, id="failures-table")
        yield Static("", id="failures-info")

    @property
    def table(self) -> KeyedTable:
        return self.query_one("#failures-table", KeyedTable)

    @property
    def window_ms(self) -> int | None:
        return WINDOWS[self.window]

    def on_mount(self) -> None:
        self._draw_window()

    async def read(self) -> FailuresRefreshed:
        window = self.window
        groups = await self.console.inspector.failure_groups(
            window_ms=WINDOWS[window], buckets=BUCKETS
        )
        return FailuresRefreshed(0.0, groups, window)

    def on_failures_refreshed(self, message: FailuresRefreshed) -> None:
        stale = message.window != self.window  # the window changed meanwhile
        if not stale:
            self.groups = message.groups
        self.drawn(message, draw=not stale)

    def draw(self) -> None:
        groups = self.groups
        self._draw_window()
        if groups is None:
            return
        now = self.console.clock()
        rows = [
            (
                group_row_key(g),
                [
                    Text(f"{g.count:,}", style="bold"),
                    safe_text(g.name, limit=32),
                    safe_text(g.error_type, "bold red", limit=20),
                    safe_text(g.message, limit=40),
                    Text(age(g.first_seen_ms, now) + " ago"),
                    Text(age(g.last_seen_ms, now) + " ago"),
                    Text(short_id(g.example_id), style="dim"),
                    sparkline(list(g.buckets)),
                ],
            )
            for g in groups.groups
        ]
        self.table.sync(rows)
        total = sum(g.count for g in groups.groups)
        info = f"{len(groups.groups)} group(s), {total:,} failure(s) · {groups.window_note}"
        if not groups.groups:
            info = f"No failed task in the {WINDOW_TITLES[self.window]} · {groups.window_note}"
        self.query_one("#failures-info", Static).update(Text(info, style="dim"))

    def _draw_window(self) -> None:
        labels = Text("Window: ", style="bold")
        for label in WINDOW_ORDER:
            style = "reverse bold" if label == self.window else "dim"
            labels.append(f" {label} ", style=style)
            labels.append(" ")
        labels.append(f"  ({WINDOW_TITLES[self.window]}; w changes it)", style="dim")
        self.query_one("#failures-window", Static).update(labels)

    # -- actions ----------------------------------------------------------------------------

    def highlighted(self) -> FailureGroup | None:
        key = self.table.cursor_key
        if self.groups is None or key is None:
            return None
        return next((g for g in self.groups.groups if group_row_key(g) == key), None)

    def action_next_window(self) -> None:
        self.window = WINDOW_ORDER[(WINDOW_ORDER.index(self.window) + 1) % len(WINDOW_ORDER)]
        self._draw_window()
        self.console.refresh_now(force=True)

    def on_keyed_table_row_selected(self, event: KeyedTable.RowSelected) -> None:
        event.stop()
        self.action_open_group()

    def action_open_group(self) -> None:
        from cairnq_tui.screens.panel import PanelScreen
        from cairnq_tui.widgets.failure_group_view import FailureGroupView

        group = self.highlighted()
        if group is None:
            return
        view = FailureGroupView(group.key, self.window, id="failure-group-view")
        self.app.push_screen(PanelScreen(view, f"Failure group · {WINDOW_TITLES[self.window]}"))

    def action_open_example(self) -> None:
        group = self.highlighted()
        if group is not None:
            self.console.open_task(group.example_id)

    def action_retry_group(self) -> None:
        self._group_action("retry")

    def action_cancel_group(self) -> None:
        self._group_action("cancel")

    def action_purge_group(self) -> None:
        self._group_action("purge")

    def _group_action(self, verb: str) -> None:
        group = self.highlighted()
        if group is not None:
            self._run_group_action(group.key, self.window_ms, verb)

    @work(group="control", exit_on_error=False)
    async def _run_group_action(
        self, key: tuple[str, str, str], window_ms: int | None, verb: str
    ) -> None:
        await start_group_action(self.console, self.app, key, window_ms, verb)
