"""The Waits view: every wait in progress in this process, from the engine's registry.

Console waits (following a key) and handlers' ``ctx.wait`` alike: what is waited
on, for how long, the task the subject resolves to on its last beat and that
task's status, and how many times a ``replace`` moved the key to another task.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult

from cairnq_tui.formatting import duration, safe_text, status_text
from cairnq_tui.widgets.hosted_view import HostedView
from cairnq_tui.widgets.keyed_table import KeyedTable

COLUMNS = [
    ("Wait", "wait"),
    ("Kind", "kind"),
    ("Subject", "subject"),
    ("Elapsed", "elapsed"),
    ("Resolves to", "task"),
    ("Status", "status"),
    ("Replaced", "replaced"),
    ("Gives up in", "deadline"),
]


class WaitsView(HostedView):
    """One row per wait, oldest first."""

    def compose_body(self) -> ComposeResult:
        yield KeyedTable(COLUMNS, id="waits-table")

    def draw(self) -> None:
        now = self.now()
        rows = []
        for wait in sorted(self.waits, key=lambda w: (w.started_at_ms, w.wait_id)):
            subject = f"key {wait.key}" if wait.key is not None else wait.subject
            rows.append(
                (
                    str(wait.wait_id),
                    [
                        Text(str(wait.wait_id)),
                        Text(wait.kind),
                        safe_text(subject, limit=40),
                        Text(duration(max(0, now - wait.started_at_ms))),
                        Text(wait.task_id or "—", style="" if wait.task_id else "dim"),
                        status_text(wait.last_status),
                        Text(
                            str(wait.replace_count), style="bold" if wait.replace_count else "dim"
                        ),
                        Text(duration(max(0, wait.deadline_ms - now))),
                    ],
                )
            )
        self.query_one("#waits-table", KeyedTable).sync(rows)
