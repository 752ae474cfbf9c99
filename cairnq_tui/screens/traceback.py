"""A hosted worker's error report with its full traceback, on demand."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from cairnq_tui import keymap
from cairnq_tui.formatting import clean
from cairnq_tui.widgets.key_footer import KeyFooter
from engine.snapshots import ErrorReport


class TracebackScreen(ModalScreen[None]):
    """The report's header and its traceback, shown literally (never as markup)."""

    BINDINGS = keymap.DIALOG

    def __init__(self, spec: str, report: ErrorReport) -> None:
        super().__init__()
        self.spec = spec
        self.report = report

    def compose(self) -> ComposeResult:
        r = self.report
        yield KeyFooter()  # the keys of this dialog, not of the screen under it
        with VerticalScroll(classes="dialog traceback"):
            yield Static(
                Text(f"{clean(r.exception_type)} in {clean(self.spec)}", style="bold"),
                classes="dialog-title",
            )
            yield Static(
                Text(f"phase {clean(r.phase)} · task {clean(r.task_id or '—')}\n{clean(r.message)}")
            )
            # The traceback keeps its line breaks; each line is cleaned on its own.
            lines = "\n".join(clean(line) for line in r.traceback.splitlines())
            yield Static(Text(lines, style="dim"), classes="traceback-text")

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
