"""The doorways between the console app and what it hosts, as protocols.

``Console`` is the app as its views and screens see it (``self.console``, from
``widgets/view_bases.py``): the database handles, what the session knows, the
refresh loop and navigation, and ``controls``. ``Controls`` is the narrow port
of the writes a view may start (the controls in ``cairnq_tui/controls/``
implement it). Neither names a concrete class, so nothing here imports the
app, the controls or a screen: ``app.py`` builds them all and imports them,
never the other way round. What Textual's ``App`` offers every widget
(``notify``, ``push_screen`` …) stays on ``self.app``.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

from textual.notifications import SeverityLevel
from textual.screen import Screen, ScreenResultCallbackType
from textual.worker import Worker as TextualWorker

from cairnq_tui.clock import Clock
from cairnq_tui.history import HistorySession
from cairnq_tui.hosting import WorkerHost
from cairnq_tui.messages import DataMessage
from cairnq_tui.settings import Settings
from engine import CairnQ, TaskStore
from engine.inspection import Inspector, TaskFilter
from engine.snapshots import WaitSnapshot

if TYPE_CHECKING:
    from textual.app import App

    from cairnq_tui.widgets.status_bar import StatusBar


ResultT = TypeVar("ResultT")


class AppCalls(Protocol):
    """The few calls of Textual's ``App`` that the controls and target switching make."""

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

    def install_screen(self, screen: Screen[Any], name: str) -> None: ...

    @property
    def screen_stack(self) -> list[Screen[Any]]: ...

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


class TaskLike(Protocol):
    """What a control needs to describe a task (a Task, TaskSummary or LeaseInfo)."""

    @property
    def id(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def attempt(self) -> int: ...
    @property
    def max_attempts(self) -> int: ...


class Controls(Protocol):
    """The writes a view or screen may start. Each asks first, and every one passes
    the same policies (read-only refusal, a danger target's name, pending and
    abandon): see ``controls/_write_path.py``."""

    def cancel_tasks(
        self, tasks: Sequence[TaskLike], *, clear: Callable[[], None] | None = None
    ) -> None:
        """Cancel these tasks; ``clear`` (a view's selection) runs once confirmed."""

    def cancel_matching(self, flt: TaskFilter) -> None:
        """Cancel every live task matching ``flt`` (capped), counted first."""

    def retry_tasks(
        self, tasks: Sequence[TaskLike], *, clear: Callable[[], None] | None = None
    ) -> None:
        """Retry these failed/canceled tasks; ``clear`` runs once confirmed."""

    def purge_tasks(self, tasks: Sequence[TaskLike]) -> None:
        """Purge these tasks (the finished ones), after confirming."""

    def retry_matching(self, flt: TaskFilter) -> None:
        """Retry every failed/canceled task matching ``flt`` (capped), counted first."""

    def cancel_by_key(self, key: str | None = None) -> None:
        """Cancel what a key points at (asks for the key when not given)."""

    def retry_by_key(self, key: str | None = None) -> None:
        """Retry what a key points at (asks for the key when not given)."""

    def replace(self, task_id: str, key: str | None = None) -> None:
        """Replace a keyed task: a new one under its key, its payload prefilled."""

    def submit(self) -> None:
        """Open the submit form."""

    def purge(self) -> None:
        """Open the purge form."""


class Console(Protocol):
    """The console app as its views and screens see it."""

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
    #: The target's history file (recorder, audit trail), or None (``--no-history``).
    history: HistorySession | None

    # -- what the session was asked for and has learnt ----------------------------------------
    settings: Settings
    read_only: bool
    connected: bool
    #: Refreshes started so far (slow counts run every ``settings.slow_every``).
    ticks: int
    #: The queues the database held at connect.
    known_queues: list[str]
    #: The hosted worker the hosted views' controls act on (modulo their number).
    hosted_index: int
    #: The Tasks view's columns as the operator chose them (None: all, in order).
    task_columns: list[str] | None

    def learn(self, names: Iterable[str] = (), queues: Iterable[str] = ()) -> bool:
        """Add task names and queues seen since connect to what completes and filters."""
        ...

    async def read_completions(self) -> tuple[list[str], list[str]]:
        """Every name and queue known now (the database's and the hosted workers')."""
        ...

    @property
    def controls(self) -> Controls:
        """The writes (see ``Controls``)."""
        ...

    # -- the refresh loop ---------------------------------------------------------------------
    def refresh_now(self, *, force: bool = False) -> None:
        """Start a refresh of the visible view now (or right after the running one)."""

    def refresh_drawn(self, message: DataMessage) -> None:
        """A view drew a refresh result: record its cost and arm the next tick."""

    def refresh_state(self) -> str:
        """What the status bar says about the refresh loop."""
        ...

    def status_bar(self) -> StatusBar | None:
        """The main screen's status bar (None while there is none)."""

    def on_worker_state_changed(self, event: TextualWorker.StateChanged) -> None:
        """The one place a failed worker becomes a notification."""

    # -- navigation -------------------------------------------------------------------------------
    def open_task(self, task_id: str | None, *, follow_key: str | None = None) -> None:
        """Show the detail screen of a task (or of whatever ``follow_key`` points at)."""

    def open_queue(self, queue: str) -> None:
        """Show the Tasks view filtered to ``queue``."""

    def action_show_view(self, name: str) -> None:
        """Show a view of the main screen (closing the screens above it)."""


def console_of(app: App[object]) -> Console:
    """The console app (``self.app`` of any of its widgets), typed."""
    return cast("Console", app)
