"""The main screen: the views as tabs, the status bar and the footer.

The database views (tasks, queues, leases, keys) come first, then the views of
this process (waits, and with ``--worker`` the hosted workers' quotas,
resources, calls and errors). Each view is a widget with ``refresh_data()``; the
app refreshes whichever tab is visible.
"""

from __future__ import annotations

from collections.abc import Callable

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Header, TabbedContent, TabPane

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
    """Tabs for every view; switching tabs refreshes the new one at once."""

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        with TabbedContent(initial="tasks", id="views"):
            for view_id, (title, view_class) in VIEWS.items():
                with TabPane(f"{title} [{list(VIEWS).index(view_id) + 1}]", id=view_id):
                    yield view_class(id=f"{view_id}-view")
        yield StatusBar()
        yield KeyFooter()

    def __init__(self) -> None:
        super().__init__()
        #: The tabs and the views by name, found once: a query walks the whole DOM,
        #: and a view switch would otherwise run several.
        self._tabs: TabbedContent | None = None
        self._views: dict[str, DataView] = {}
        self._stop_listening: Callable[[], None] | None = None

    def on_mount(self) -> None:
        host = self.console.host
        if host:  # hosted workers push their state changes: the strip shows them at once
            self._stop_listening = host.on_change(lambda s: self.post_message(HostedChanged(s)))
        self._tabs = self.query_one("#views", TabbedContent)
        self._views = {name: self.query_one(f"#{name}-view", DataView) for name in VIEWS}
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
        """The visible view, or None while the screen is still being composed."""
        if self._tabs is None:
            return None
        return self._views.get(self._tabs.active)

    def show_view(self, name: str) -> bool:
        """Show a view and focus its table; True when another view was shown before.

        Switching tabs refreshes the new view (``TabActivated``); showing the
        view already shown does not.
        """
        tabs = self._tabs or self.query_one("#views", TabbedContent)
        switched = tabs.active != name
        tabs.active = name
        view = self.active_view()
        if view is None:
            return switched
        table = view.query("KeyedTable")
        if table:
            table.first().focus()
        return switched

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        self.console.refresh_now(force=True)

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
