"""The confirmation every control shows: exactly what will change, then yes or no."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Label, Static

from cairnq_tui import keymap
from cairnq_tui.widgets.key_footer import KeyFooter


class ConfirmScreen(ModalScreen[dict[str, Any] | None]):
    """Returns ``{"reset": bool}`` when confirmed, None when dismissed."""

    BINDINGS = keymap.CONFIRM

    def __init__(
        self,
        title: str,
        lines: Sequence[str],
        *,
        confirm_label: str = "Confirm",
        reset_option: bool = False,
    ) -> None:
        super().__init__()
        self.title_text = title
        self.lines = list(lines)
        self.confirm_label = confirm_label
        self.reset_option = reset_option

    def compose(self) -> ComposeResult:
        yield KeyFooter()  # the keys of this dialog, not of the screen under it
        with Vertical(classes="dialog"):
            yield Label(Text(self.title_text, style="bold"), classes="dialog-title")
            yield Static(Text("\n".join(self.lines)), classes="dialog-body")
            if self.reset_option:
                yield Checkbox("Reset the attempt count to 0", id="reset")
            with Horizontal(classes="dialog-buttons"):
                yield Button(self.confirm_label, variant="error", id="confirm")
                yield Button("Back", id="back")

    def on_mount(self) -> None:
        self.query_one("#back", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "confirm":
            self.action_confirm()
        else:
            self.dismiss(None)

    def action_confirm(self) -> None:
        reset = self.query_one("#reset", Checkbox).value if self.reset_option else False
        self.dismiss({"reset": reset})

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
