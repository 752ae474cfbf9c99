"""The ``?`` screen: every key, by where it applies (from the keymap)."""

from __future__ import annotations

from rich.cells import cell_len
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from cairnq_tui import keymap
from cairnq_tui.widgets.key_footer import KeyFooter


def _key_label(binding: Binding) -> str:
    if binding.key_display:
        return binding.key_display
    return {"question_mark": "?", "space": "space", "enter": "enter", "escape": "esc"}.get(
        binding.key, binding.key
    )


class HelpScreen(ModalScreen[None]):
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
        parts: list[RenderableType] = []
        for title, bindings in [*keymap.SECTIONS, ("Anywhere", [])]:
            parts.append(Text(title, style="bold underline"))
            table = Table.grid(padding=(0, 2))
            table.add_column(style="bold cyan", no_wrap=True, width=key_width)
            table.add_column(ratio=1)
            for binding in bindings:
                action = binding.action.split("(")[0]
                text = Text(binding.description)
                if self.read_only and action in keymap.CONTROL_ACTIONS:
                    text = Text.assemble(
                        (binding.description, "dim strike"), (" (disabled: read-only)", "dim")
                    )
                table.add_row(_key_label(binding), text)
            if not bindings:
                table.add_row("ctrl+p", "Command palette: every action and view")
            parts += [table, Text("")]
        yield KeyFooter()  # the keys of this dialog, not of the screen under it
        with VerticalScroll(classes="dialog help"):
            yield Static(Text("Keys", style="bold"), classes="dialog-title")
            yield Static(Group(*parts))
