"""The main screen: the views as tabs, the status bar and the footer.

The database views (tasks, queues, leases, keys) come first, then the views of
this process (waits, and with ``--worker`` the hosted workers' quotas,
resources, calls and errors). Each view is a widget with ``refresh_data()``; the
app refreshes whichever tab is visible.

The tabs are our own: a ``ViewTabs`` strip (one widget) over the views, which
are children of the screen itself, only the shown one with ``display`` on.
Textual's ``TabbedContent`` cost a view switch about twenty more widgets to
restyle and draw, and an underline animated for 0.3 s after it (see
``widgets/view_tabs.py``); a container around the views drew its whole area
again on every switch although the view covers it.
"""

from __future__ import annotations

from collections.abc import Callable

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Header

from cairnq_tui.messages import StoreConnected
from cairnq_tui.widgets.calls_view import CallsView
from cairnq_tui.widgets.errors_view import ErrorsView
from cairnq_tui.widgets.hosted_view import HostedChanged, HostedView
from cairnq_tui.widgets.key_footer import KeyFooter
from cairnq_tui.widgets.keys_view import KeysView
from cairnq_tui.widgets.leases_view import LeasesView
from cairnq_tui.widgets.queues_view import QueuesView
from cairnq_tui.widgets.quotas_view import QuotasView
from cairnq_tui.widgets.resources_view import ResourcesView
from cairnq_tui.widgets.status_bar import StatusBar
from cairnq_tui.widgets.tasks_view import TasksView
from cairnq_tui.widgets.view_bases import ConsoleNode, DataView
from cairnq_tui.widgets.view_tabs import ViewTabs
from cairnq_tui.widgets.waits_view import WaitsView

VIEWS = {
    "tasks": ("Tasks", TasksView),
    "queues": ("Queues", QueuesView),
    "leases": ("Leases", LeasesView),
    "keys": ("Keys", KeysView),
    # What only this process knows: its waits, and its hosted workers (--worker).
    "waits": ("Waits", WaitsView),
    "quotas": ("Quotas", QuotasView),
    "resources": ("Resources", ResourcesView),
    "calls": ("Calls", CallsView),
    "errors": ("Errors", ErrorsView),
}


class MainScreen(ConsoleNode, Screen[None]):
    """Tabs for every view; a switch shows the view at once and refreshes it right after."""

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        yield self._tabs
        yield from self._views.values()  # children of the screen: no container to draw
        yield StatusBar()
        yield KeyFooter()

    def __init__(self) -> None:
        super().__init__()
        #: The name of the view shown.
        self.shown = "tasks"
        labels = {name: f"{title} [{n}]" for n, (name, (title, _)) in enumerate(VIEWS.items(), 1)}
        self._tabs = ViewTabs(labels, active=self.shown, id="view-tabs")
        #: The views by name, made once: a query walks the whole DOM.
        self._views: dict[str, DataView] = {}
        for name, (_title, view_class) in VIEWS.items():
            view = self._views[name] = view_class(id=f"{name}-view")
            view.display = name == self.shown
        self._stop_listening: Callable[[], None] | None = None

    def on_mount(self) -> None:
        host = self.console.host
        if host:  # hosted workers push their state changes: the strip shows them at once
            self._stop_listening = host.on_change(lambda s: self.post_message(HostedChanged(s)))
        console = self.console
        settings = console.settings
        bar = self.query_one(StatusBar)
        bar.target = settings.target.display + (
            f" (schema {settings.target.schema})" if settings.target.schema else ""
        )
        bar.dialect = console.store.dialect
        bar.read_only = console.read_only
        bar.target_name = settings.name or ""
        bar.danger = settings.danger
        bar.state = console.refresh_state()

    def on_unmount(self) -> None:
        if self._stop_listening is not None:
            self._stop_listening()
            self._stop_listening = None

    def on_hosted_changed(self, message: HostedChanged) -> None:
        for view in self._views.values():
            if isinstance(view, HostedView):
                view.status_changed(message.status)

    def active_view(self) -> DataView | None:
        """The visible view, or None while the screen is not mounted."""
        return self._views[self.shown] if self.is_mounted else None

    def show_view(self, name: str) -> bool:
        """Show a view and focus its table; True when another view was shown before.

        Switching views refreshes the new view once the frame that shows it is
        drawn; showing the view already shown does not (the caller refreshes).
        """
        view = self._views[name]
        switched = name != self.shown
        if switched:
            self._views[self.shown].display = False
            view.display = True
            self.shown = self._tabs.active = name
            # After the frame that shows the view: a quick read landing first
            # would hold that frame back by its drawing.
            self.call_after_refresh(self.console.refresh_now, force=True)
        table = view.query("KeyedTable")
        if table:
            table.first().focus()
        return switched

    def on_view_tabs_clicked(self, message: ViewTabs.Clicked) -> None:
        self.console.action_show_view(message.view)

    def on_screen_resume(self) -> None:
        if self.console.connected:
            self.console.refresh_now()

    def store_connected(self, message: StoreConnected) -> None:
        """Offer the database's queues and names in the filters."""
        self.offer_choices(message.queues, message.names)

    def offer_choices(self, queues: list[str], names: list[str]) -> None:
        """Offer these queues and names in the Tasks view's filters."""
        for view in self.query(TasksView):  # none while the screen is composed or torn down
            view.set_choices(queues, names)

    def open_queue(self, queue: str) -> None:
        """Show the Tasks view filtered to ``queue``."""
        self.show_view("tasks")
        self.query_one(TasksView).show_queue(queue)
