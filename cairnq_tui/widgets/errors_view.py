"""The Errors view: what the hosted workers survived (``on_error`` reports) and their
recent handler failures, newest first; enter shows the traceback. The view keeps
every report it has seen (bounded), so a reload does not wipe the history.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult

from cairnq_tui import keymap
from cairnq_tui.formatting import age, safe_text
from cairnq_tui.screens.traceback import TracebackScreen
from cairnq_tui.widgets.hosted_view import HostedView
from cairnq_tui.widgets.keyed_table import KeyedTable
from engine.snapshots import ErrorReport

COLUMNS = [
    ("When", "when"),
    ("Worker", "worker"),
    ("Kind", "kind"),
    ("Phase", "phase"),
    ("Task", "task"),
    ("Error", "error"),
]

#: The most reports the view keeps (reloads and the workers' own bounded histories
#: would otherwise drop them).
HISTORY_CAP = 500


class ErrorsView(HostedView):
    """One row per report; ``enter`` opens its traceback."""

    BINDINGS = keymap.ERRORS

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.reports: dict[str, tuple[str, ErrorReport]] = {}
        #: Every report seen since the console started (newest HISTORY_CAP kept).
        self.history: dict[str, tuple[str, str, ErrorReport]] = {}

    def compose_body(self) -> ComposeResult:
        yield KeyedTable(COLUMNS, id="errors-table")

    def draw(self) -> None:
        now = self.now()
        entries = []
        seen: dict[str, int] = {}
        for status in self.statuses:
            snap = status.snapshot
            if snap is None:
                continue
            sources = (("on_error", snap.recent_errors), ("failure", snap.recent_failures))
            for kind, reports in sources:
                for report in reports:
                    # Reports have no id; what they say, plus a repeat count, is stable
                    # across refreshes while the bounded history shifts.
                    base = f"{status.spec}/{kind}/{report.at_ms}/{report.task_id}"
                    seen[base] = seen.get(base, 0) + 1
                    entries.append((f"{base}/{seen[base]}", kind, status.spec, report))
        # The console keeps what it has seen: a reloaded worker starts with an empty
        # history, and the operator still wants the errors that led to the reload.
        for key, kind, spec, report in entries:
            self.history.setdefault(key, (kind, spec, report))
        entries = [(key, *entry) for key, entry in self.history.items()]
        entries.sort(key=lambda e: e[3].at_ms, reverse=True)
        if len(entries) > HISTORY_CAP:
            entries = entries[:HISTORY_CAP]
            self.history = {key: (kind, spec, r) for key, kind, spec, r in entries}
        self.reports = {key: (spec, report) for key, _, spec, report in entries}
        rows = [
            (
                key,
                [
                    Text(age(report.at_ms, now)),
                    safe_text(spec, limit=30),
                    Text(kind, style="bold red" if kind == "on_error" else "red"),
                    safe_text(report.phase, limit=24),
                    Text(report.task_id or "—", style="" if report.task_id else "dim"),
                    safe_text(f"{report.exception_type}: {report.message}", limit=80),
                ],
            )
            for key, kind, spec, report in entries
        ]
        self.query_one("#errors-table", KeyedTable).sync(rows)

    def on_keyed_table_row_selected(self, event: KeyedTable.RowSelected) -> None:
        event.stop()
        self.action_show_traceback()

    def action_show_traceback(self) -> None:
        key = self.query_one("#errors-table", KeyedTable).cursor_key
        if key is None or key not in self.reports:
            return
        spec, report = self.reports[key]
        self.app.push_screen(TracebackScreen(spec, report))
