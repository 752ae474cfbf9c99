"""A screen holding one view that is not a tab: Failures, Metrics, Audit, Workers.

Opened from the command palette (ctrl+p) over the main screen; escape goes back.
The app's refresh loop refreshes the screen on top, and this screen hands that
on to its view, so the view reads, measures and draws like any tab's view.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Header

from cairnq_tui import keymap
from cairnq_tui.widgets.key_footer import KeyFooter
from cairnq_tui.widgets.status_bar import StatusBar
from cairnq_tui.widgets.view_bases import DataNode, DataView


class PanelScreen(DataNode, Screen[None]):
    """One view on a screen of its own, with the status bar and footer."""

    BINDINGS = keymap.PANEL

    def __init__(self, view: DataView, title: str) -> None:
        super().__init__()
        self.view = view
        self.panel_title = title

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        yield self.view
        yield StatusBar()
        yield KeyFooter()

    def on_mount(self) -> None:
        self.sub_title = self.panel_title
        bar = self.query_one(StatusBar)
        main_bar = self.console.status_bar()
        if main_bar is not None:
            bar.target, bar.dialect, bar.versions = (
                main_bar.target,
                main_bar.dialect,
                main_bar.versions,
            )
        settings = self.console.settings
        bar.read_only = self.console.read_only
        bar.target_name = settings.name or ""
        bar.danger = settings.danger
        bar.state = self.console.refresh_state()
        tables = self.view.query("KeyedTable")
        if tables:
            tables.first().focus()
        self.console.refresh_now(force=True)

    def refresh_data(self) -> None:
        self.view.refresh_data()

    def action_back(self) -> None:
        self.app.pop_screen()
