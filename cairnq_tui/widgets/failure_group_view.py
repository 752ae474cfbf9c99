"""One failure group's tasks (``enter`` on a row of the Failures view).

``Inspector.failure_selection`` gives the group's exact count in the window and
its newest task ids; the newest ``SHOWN`` are read in full and listed with their
own (unmasked) error. ``enter`` opens a task; ``r`` / ``c`` act on the group.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.widgets import Static

from cairnq_tui import keymap
from cairnq_tui.formatting import age, safe_text, status_text
from cairnq_tui.messages import DataMessage
from cairnq_tui.widgets.failure_actions import describe_group, start_group_action
from cairnq_tui.widgets.keyed_table import ColumnSpec, KeyedTable
from cairnq_tui.widgets.task_rows import OpensTaskRows
from cairnq_tui.widgets.view_bases import DataView
from engine import Task
from engine.inspection import WINDOWS, FailureSelection

#: Tasks of the group read and listed (newest first).
SHOWN = 50
COLUMNS: list[ColumnSpec] = [
    ("ID", "id"),
    ("Queue", "queue"),
    ("Status", "status"),
    ("Att", "attempt"),
    ("Failed", "failed"),
    ("Error (as recorded)", "error"),
]


@dataclass
class GroupRefreshed(DataMessage):
    selection: FailureSelection
    tasks: list[Task]


def error_line(task: Task) -> Text:
    error = task.error if isinstance(task.error, dict) else {}
    message = str(error.get("message", "")).split("\n", 1)[0]
    return Text.assemble(
        safe_text(str(error.get("type", "")), "bold red", limit=24),
        ": ",
        safe_text(message, limit=80),
    )


class FailureGroupView(OpensTaskRows, DataView):
    """The newest tasks of one failure group, and the group's exact count."""

    BINDINGS = keymap.FAILURE_GROUP

    def __init__(self, key: tuple[str, str, str], window: str, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.key = key
        self.window = window
        self.selection: FailureSelection | None = None
        self.tasks: list[Task] = []

    def compose(self) -> ComposeResult:
        yield Static(Text(describe_group(*self.key), style="bold"), id="group-title")
        yield KeyedTable(COLUMNS, id="group-table")
        yield Static("", id="group-info")

    @property
    def table(self) -> KeyedTable:
        return self.query_one("#group-table", KeyedTable)

    async def read(self) -> GroupRefreshed:
        console = self.console
        selection = await console.inspector.failure_selection(
            self.key, window_ms=WINDOWS[self.window], limit=SHOWN
        )
        tasks = [t for i in selection.task_ids if (t := await console.client.get(i)) is not None]
        return GroupRefreshed(0.0, selection, tasks)

    def on_group_refreshed(self, message: GroupRefreshed) -> None:
        self.selection, self.tasks = message.selection, message.tasks
        self.drawn(message)

    def draw(self) -> None:
        selection = self.selection
        if selection is None:
            return
        now = self.console.clock()
        self.table.sync(
            [
                (
                    t.id,
                    [
                        Text(t.id, style="dim"),
                        safe_text(t.queue, limit=24),
                        status_text(t.status),
                        Text(f"{t.attempt}/{t.max_attempts}"),
                        Text(age(t.completed_at_ms or t.updated_at_ms, now) + " ago"),
                        error_line(t),
                    ],
                )
                for t in self.tasks
            ]
        )
        window = "everything kept" if self.window == "all" else f"the last {self.window}"
        shown = f"showing the newest {len(self.tasks)}" if selection.truncated else "all shown"
        capped = " (the window held more failures than were read)" if selection.capped else ""
        self.query_one("#group-info", Static).update(
            Text(
                f"{selection.count:,} failed task(s) in {window}{capped} · {shown} · "
                "r retries, c cancels the group",
                style="dim",
            )
        )

    def action_open_task(self) -> None:
        key = self.table.cursor_key
        if key is not None:
            self.console.open_task(key)

    def action_retry_group(self) -> None:
        self._run_group_action("retry")

    def action_cancel_group(self) -> None:
        self._run_group_action("cancel")

    @work(group="control", exit_on_error=False)
    async def _run_group_action(self, verb: str) -> None:
        await start_group_action(self.console, self.app, self.key, WINDOWS[self.window], verb)
