"""A one-field dialog (the key for cancel/retry by key)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label

from cairnq_tui import keymap
from cairnq_tui.widgets.key_footer import KeyFooter


class PromptScreen(ModalScreen[str | None]):
    """Asks for one value; enter returns it, escape returns None."""

    BINDINGS = keymap.DIALOG

    def __init__(self, title: str, placeholder: str, value: str = "") -> None:
        super().__init__()
        self.title_text = title
        self.placeholder = placeholder
        self.value = value

    def compose(self) -> ComposeResult:
        yield KeyFooter()  # the keys of this dialog, not of the screen under it
        with Vertical(classes="dialog"):
            yield Label(Text(self.title_text, style="bold"), classes="dialog-title")
            yield Input(self.value, placeholder=self.placeholder, id="prompt")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
