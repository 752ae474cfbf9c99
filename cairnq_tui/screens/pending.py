"""The dialog of a write the database has not answered yet: escape abandons it."""

from __future__ import annotations

import time

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Static

from cairnq_tui import keymap


class PendingWriteScreen(ModalScreen[bool]):
    """Returns True when the operator abandons the write (False: it ended by itself)."""

    BINDINGS = keymap.PENDING

    def __init__(self, what: str, started: float) -> None:
        """Args:
        what: the write, in a few words.
        started: when it started (``time.monotonic()``).
        """
        super().__init__()
        self.what = what
        self.started = started

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(Text("Waiting for the database", style="bold"), classes="dialog-title")
            yield Static(self._body(), classes="dialog-body", id="pending-body")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Abandon", variant="error", id="abandon")

    def _body(self) -> Text:
        waited = time.monotonic() - self.started
        return Text(
            f"{self.what}: pending for {waited:.0f}s, the database has not answered.\n"
            "This closes by itself when the write ends. Escape abandons it: what has "
            "not been sent is never sent, and a statement already sent may still be "
            "applied when the connection comes back (the console checks and says)."
        )

    def on_mount(self) -> None:
        self.set_interval(0.5, self._tick)

    def _tick(self) -> None:
        self.query_one("#pending-body", Static).update(self._body())

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.action_abandon()

    def action_abandon(self) -> None:
        self.dismiss(True)
