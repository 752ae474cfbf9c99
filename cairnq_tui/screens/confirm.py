"""The confirmation every write shows: exactly what will change, then yes or no.

On a ``danger = true`` target the confirmation also asks for the target's name:
``y`` and the confirm button do nothing until it is typed, and enter in the name
field confirms. The controls decide which targets ask (``controls/_write_path.py``);
this screen only draws the question.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Input, Label, Static

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
        type_name: str | None = None,
    ) -> None:
        """Args:
        type_name: the danger target's name, to be typed before confirming
            (None: ``y`` confirms).
        """
        super().__init__()
        self.title_text = title
        self.lines = list(lines)
        self.confirm_label = confirm_label
        self.reset_option = reset_option
        self.type_name = type_name

    def compose(self) -> ComposeResult:
        yield KeyFooter()  # the keys of this dialog, not of the screen under it
        with Vertical(classes="dialog" + (" danger-dialog" if self.type_name else "")):
            yield Label(Text(self.title_text, style="bold"), classes="dialog-title")
            yield Static(Text("\n".join(self.lines)), classes="dialog-body")
            if self.reset_option:
                yield Checkbox("Reset the attempt count to 0", id="reset")
            if self.type_name is not None:
                yield Static(
                    Text(
                        f"{self.type_name} is marked danger in the config: type "
                        f"{self.type_name} and press enter to go on; escape goes back."
                    ),
                    id="danger-note",
                )
                yield Input(placeholder=self.type_name, id="type-name")
            with Horizontal(classes="dialog-buttons"):
                yield Button(self.confirm_label, variant="error", id="confirm")
                yield Button("Back", id="back")

    def on_mount(self) -> None:
        if self.type_name is not None:
            self.query_one("#type-name", Input).focus()
        else:
            self.query_one("#back", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "confirm":
            self.action_confirm()
        else:
            self.dismiss(None)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_confirm()

    def action_confirm(self) -> None:
        if self.type_name is not None:
            typed = self.query_one("#type-name", Input)
            if typed.value.strip() != self.type_name:
                self.notify(
                    f"Type {self.type_name} to go on; nothing was done.",
                    severity="warning",
                    markup=False,
                )
                typed.value = ""
                typed.focus()
                return
        reset = self.query_one("#reset", Checkbox).value if self.reset_option else False
        self.dismiss({"reset": reset})

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
