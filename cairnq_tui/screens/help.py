"""The ``?`` screen: every key, by where it applies (from the keymap)."""

from __future__ import annotations

from rich.cells import cell_len
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from cairnq_tui import keymap
from cairnq_tui.screens.reused import StyledOnce
from cairnq_tui.widgets.key_footer import KeyFooter


def _key_label(binding: Binding) -> str:
    if binding.key_display:
        return binding.key_display
    return {"question_mark": "?", "space": "space", "enter": "enter", "escape": "esc"}.get(
        binding.key, binding.key
    )


class HelpScreen(StyledOnce, ModalScreen[None]):
    """Lists the keymap; controls are marked disabled in read-only mode."""

    BINDINGS = keymap.HELP

    def __init__(self, *, read_only: bool = False) -> None:
        super().__init__()
        self.read_only = read_only

    def compose(self) -> ComposeResult:
        # Section titles are lines of their own, not cells of the key column: the
        # key column is as wide as the widest key, the same in every section.
        key_width = max(
            cell_len(_key_label(b)) for _, bindings in keymap.SECTIONS for b in bindings
        )
        key_width = max(key_width, cell_len("ctrl+p"))
        # One Text, not a table per section: the screen draws (and lays out) it
        # each time it is shown, and a dozen tables cost more than the rest of it.
        text = Text(end="")
        for title, bindings in [*keymap.SECTIONS, ("Anywhere", [])]:
            text.append(title, style="bold underline")
            text.append("\n")
            rows = [(_key_label(b), self._description(b)) for b in bindings] or [
                ("ctrl+p", Text("Command palette: every action and view"))
            ]
            for key, description in rows:
                text.append(key.ljust(key_width), style="bold cyan")
                text.append("  ")
                text.append_text(description)
                text.append("\n")
            text.append("\n")
        text.rstrip()
        yield KeyFooter()  # the keys of this dialog, not of the screen under it
        with VerticalScroll(classes="dialog help"):
            yield Static(Text("Keys", style="bold"), classes="dialog-title")
            yield Static(text)

    def _description(self, binding: Binding) -> Text:
        action = binding.action.split("(")[0]
        if self.read_only and action in keymap.CONTROL_ACTIONS:
            return Text.assemble(
                (binding.description, "dim strike"), (" (disabled: read-only)", "dim")
            )
        return Text(binding.description)
