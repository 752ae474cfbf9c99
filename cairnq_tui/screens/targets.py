"""The dialogs of named targets: ``:`` picks one, and a danger target's name gate."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, OptionList, Static
from textual.widgets.option_list import Option

from cairnq_tui import keymap
from cairnq_tui.formatting import clean
from cairnq_tui.widgets.key_footer import KeyFooter


class TargetPickerScreen(ModalScreen[str | None]):
    """``:`` as in k9s: type a target's name (or pick it) and press enter."""

    BINDINGS = keymap.DIALOG

    def __init__(self, targets: Sequence[tuple[str, str, bool]], current: str | None) -> None:
        """Args:
        targets: (name, where, danger) for every target of the config.
        current: the name of the target shown now.
        """
        super().__init__()
        self.targets = list(targets)
        self.current = current

    def compose(self) -> ComposeResult:
        yield KeyFooter()  # the keys of this dialog, not of the screen under it
        with Vertical(classes="dialog", id="target-picker"):
            yield Label(Text("Switch to target", style="bold"), classes="dialog-title")
            yield Input(placeholder="target name", id="target-name")
            yield OptionList(*self._options(""), id="target-list")

    def _options(self, typed: str) -> list[Option]:
        options = []
        for name, where, danger in self.targets:
            if typed.lower() not in name.lower():
                continue
            line = Text.assemble(
                (name, "bold red" if danger else "bold"),
                "  ",
                (clean(where), "dim"),
                (" (danger)", "red") if danger else "",
                (" (shown now)", "dim italic") if name == self.current else "",
            )
            options.append(Option(line, id=name))
        return options

    def on_input_changed(self, event: Input.Changed) -> None:
        found = self.query_one(OptionList)
        found.clear_options()
        found.add_options(self._options(event.value.strip()))
        if found.option_count:
            found.highlighted = 0

    def on_input_submitted(self, event: Input.Submitted) -> None:
        typed = event.value.strip()
        if any(name == typed for name, _, _ in self.targets):
            self.dismiss(typed)
            return
        found = self.query_one(OptionList)
        if found.highlighted is not None:
            option = found.get_option_at_index(found.highlighted)
            self.dismiss(option.id)
        elif typed:
            self.notify(f"No target named {typed!r} in the config.", severity="warning")

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)


class TypeNameScreen(ModalScreen[bool | None]):
    """Before a bulk action on a ``danger`` target: type its name to go on."""

    BINDINGS = keymap.DIALOG

    def __init__(self, name: str, action: str) -> None:
        super().__init__()
        self.target_name = name
        self.action_text = action

    def compose(self) -> ComposeResult:
        yield KeyFooter()  # the keys of this dialog, not of the screen under it
        with Vertical(classes="dialog danger-dialog"):
            yield Label(
                Text(f"{self.action_text} on {self.target_name}", style="bold"),
                classes="dialog-title",
            )
            yield Static(
                Text(
                    f"{self.target_name} is marked danger in the config. "
                    f"Type {self.target_name} and press enter to go on; escape goes back."
                ),
                classes="dialog-body",
            )
            yield Input(placeholder=self.target_name, id="type-name")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.value.strip() == self.target_name:
            self.dismiss(True)
        else:
            self.notify(
                f"That is not {self.target_name}; nothing was done.",
                severity="warning",
                markup=False,
            )
            event.input.value = ""

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
