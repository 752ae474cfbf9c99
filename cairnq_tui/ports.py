"""What the views, screens and controls use of the console app, as a protocol.

``ConsoleApp`` implements ``Console`` (mypy checks it, see ``app.py``). The views
reach it through ``ConsoleNode.console`` (``widgets/view_bases.py``) and the
controls are built on it, so neither imports the app: ``app.py`` imports them,
never the other way round. What Textual's ``App`` offers every widget
(``notify``, ``push_screen`` …) stays on ``self.app``; the controls, which are
not a widget, get the few of those they use from here too.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Iterable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

from textual.await_complete import AwaitComplete
from textual.message import Message
from textual.notifications import SeverityLevel
from textual.screen import Screen, ScreenResultCallbackType
from textual.worker import Worker as TextualWorker

from cairnq_tui.clock import Clock
from cairnq_tui.hosting import WorkerHost
from cairnq_tui.messages import DataMessage
from cairnq_tui.settings import Settings
from engine import CairnQ, TaskStore
from engine.inspection import Inspector
from engine.snapshots import WaitSnapshot

if TYPE_CHECKING:
    from textual.app import App

    from cairnq_tui.controls import Controls
    from cairnq_tui.widgets.status_bar import StatusBar

ResultT = TypeVar("ResultT")


class Console(Protocol):
    """The console app as its views, screens and controls see it."""

    # -- the database and this process ------------------------------------------------------
    store: TaskStore
    client: CairnQ
    inspector: Inspector
    #: Epoch ms for ages and countdowns (fixed in snapshots).
    clock: Clock
    #: The stopwatch behind "last refresh cost" (fixed in snapshots).
    measure: Callable[[], float]
    #: The waits in progress in this process (fixed in snapshots).
    wait_registry: Callable[[], list[WaitSnapshot]]
    #: The workers hosted in this process (``--worker``), or None.
    host: WorkerHost | None

    # -- what the session was asked for and has learnt ----------------------------------------
    settings: Settings
    read_only: bool
    connected: bool
    #: Refreshes started so far (slow counts run every ``settings.slow_every``).
    ticks: int
    names: list[str]
    known_queues: list[str]
    #: The hosted worker the hosted views' controls act on (modulo their number).
    hosted_index: int
    #: The Tasks view's columns as the operator chose them (None: all, in order).
    task_columns: list[str] | None
    controls: Controls

    def learn(self, names: Iterable[str] = (), queues: Iterable[str] = ()) -> bool:
        """Add task names and queues seen since connect to what completes and filters."""
        ...

    async def read_completions(self) -> tuple[list[str], list[str]]:
        """Every name and queue known now (the database's and the hosted workers')."""
        ...

    # -- the refresh loop and navigation ------------------------------------------------------
    def refresh_now(self, *, force: bool = False) -> None:
        """Start a refresh of the visible view now (or right after the running one)."""

    def refresh_drawn(self, message: DataMessage) -> None:
        """A view drew a refresh result: record its cost and arm the next tick."""

    def refresh_state(self) -> str:
        """What the status bar says about the refresh loop."""
        ...

    def status_bar(self) -> StatusBar | None:
        """The main screen's status bar (None while there is none)."""

    def open_task(self, task_id: str | None, *, follow_key: str | None = None) -> None:
        """Show the detail screen of a task (or of whatever ``follow_key`` points at)."""

    def open_queue(self, queue: str) -> None:
        """Show the Tasks view filtered to ``queue``."""

    def action_show_view(self, name: str) -> None:
        """Show a view of the main screen (closing the screens above it)."""

    async def retarget(self, store: TaskStore, settings: Settings) -> None:
        """Point the running console at another database (``:``), then connect."""

    def on_worker_state_changed(self, event: TextualWorker.StateChanged) -> None:
        """The one place a failed worker becomes a notification."""

    # -- Textual's App, as far as the controls use it --------------------------------------------
    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None: ...

    def push_screen(
        self,
        screen: Screen[ResultT],
        callback: ScreenResultCallbackType[ResultT] | None = None,
    ) -> object: ...

    def pop_screen(self) -> AwaitComplete: ...

    def run_worker(
        self,
        work: Coroutine[Any, Any, ResultT],
        name: str | None = "",
        group: str = "default",
        description: str = "",
        exit_on_error: bool = True,
        start: bool = True,
        exclusive: bool = False,
        thread: bool = False,
    ) -> TextualWorker[ResultT]: ...

    def call_later(self, callback: Callable[..., object], *args: Any, **kwargs: Any) -> bool: ...

    def post_message(self, message: Message) -> bool: ...


def console_of(app: App[object]) -> Console:
    """The console app (``self.app`` of any of its widgets), typed."""
    return cast("Console", app)
