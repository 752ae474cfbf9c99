"""The Audit view (ctrl+p "Audit"): every write this console made on this target.

Read from the target's history file (``cairnq_tui/history``), newest first:
time, OS user, action, how many tasks changed, and the ids, key or filter.
Without a history file (``--no-history``) it says so.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import Static

from cairnq_tui.formatting import safe_text
from cairnq_tui.history import AuditEntry
from cairnq_tui.messages import DataMessage
from cairnq_tui.why import clock_time
from cairnq_tui.widgets.keyed_table import ColumnSpec, KeyedTable
from cairnq_tui.widgets.view_bases import DataView

LIMIT = 500
COLUMNS: list[ColumnSpec] = [
    ("Time", "time"),
    ("User", "user"),
    ("Action", "action"),
    ("Count", "count"),
    ("Ids, key or filter", "detail"),
]


@dataclass
class AuditRefreshed(DataMessage):
    entries: list[AuditEntry] | None  # None: no history file


class AuditView(DataView):
    """The audit trail, newest first."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.entries: list[AuditEntry] | None = None

    def compose(self) -> ComposeResult:
        yield KeyedTable(COLUMNS, id="audit-table")
        yield Static("", id="audit-info")

    @property
    def table(self) -> KeyedTable:
        return self.query_one("#audit-table", KeyedTable)

    async def read(self) -> AuditRefreshed:
        history = self.console.history
        if history is None:
            return AuditRefreshed(0.0, None)
        entries = await asyncio.to_thread(history.file.audit_entries, limit=LIMIT)
        return AuditRefreshed(0.0, entries)

    def on_audit_refreshed(self, message: AuditRefreshed) -> None:
        self.entries = message.entries
        self.drawn(message)

    def draw(self) -> None:
        info = self.query_one("#audit-info", Static)
        history = self.console.history
        if self.entries is None or history is None:
            info.update(
                Text("No history file: this console was opened with --no-history.", style="dim")
            )
            return
        self.table.sync(
            [
                (
                    f"{e.at_ms}:{i}",
                    [
                        Text(clock_time(e.at_ms)),
                        safe_text(e.os_user, limit=16),
                        Text(e.action, style="bold"),
                        Text(f"{e.count:,}"),
                        safe_text(e.detail, limit=100),
                    ],
                )
                for i, e in enumerate(self.entries)
            ]
        )
        info.update(
            Text(
                f"{len(self.entries)} write(s) (the newest {LIMIT} at most) · from this "
                "target's history file (kept 7 days, 50 MB at most)",
                style="dim",
            )
        )
