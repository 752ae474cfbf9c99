"""The console application: one store, live views, and controls that ask first.

Database work runs only in workers (``@work(..., exit_on_error=False)``) that post
messages; handlers draw. The refresh loop arms its next tick only after the
previous result was drawn, skips ticks while a dialog is open or the operator
paused it, and is woken early by the engine's watch signals (NOTIFY on
Postgres). A failed read becomes a notification and the next tick tries again,
which is also how the console reconnects once the database is back.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from textual import events, work
from textual.app import App, ComposeResult
from textual.screen import ModalScreen
from textual.timer import Timer
from textual.worker import Worker as TextualWorker
from textual.worker import WorkerState

from cairnq_tui import keymap
from cairnq_tui.clock import Clock, system_clock
from cairnq_tui.commands import ConsoleCommands
from cairnq_tui.controls import ConsoleControls, ControlHost
from cairnq_tui.formatting import clean
from cairnq_tui.history_host import HistoryHost
from cairnq_tui.hosting import DEFAULT_GRACE_S, WorkerHost, quitting_notice
from cairnq_tui.messages import ControlFinished, DatabaseWoke, DataMessage, StoreConnected
from cairnq_tui.panels import PanelCommands
from cairnq_tui.ports import Console
from cairnq_tui.screens.detail import DETAIL_SCREEN, open_detail
from cairnq_tui.screens.help import HelpScreen
from cairnq_tui.screens.main import MainScreen
from cairnq_tui.settings import (
    Settings as Settings,  # (re-exported: tests and benches import it here)
)
from cairnq_tui.switching import SwitchHost, TargetCommands, pick_target
from cairnq_tui.widgets.status_bar import StatusBar
from cairnq_tui.widgets.view_bases import DataNode
from engine import CairnQ, TaskStore, WatchSignal, active_waits
from engine.inspection import Inspector
from engine.snapshots import WaitSnapshot
from engine.store import redact_dsn

#: The least time between two refreshes that watch signals may trigger.
EARLY_REFRESH_GAP_S = 0.25
#: While signals keep coming, at most one refresh this often is brought forward.
EARLY_REFRESH_EVERY_S = 1.0
#: Allocations (net of frees) between two young collections while the console
#: runs, instead of CPython's 700: see ``ConsoleApp._freeze_heap``.
GC_YOUNG_THRESHOLD = 10_000
#: A refresh still running after this long means the database is not answering:
#: the status bar says so and the rows on screen are dimmed as stale.
SLOW_REFRESH_S = 1.0
#: What is dimmed while the rows on screen are stale.
STALE_DIMS = "KeyedTable, #detail, #tasks-info"
#: How often the console looks at the running refresh's age.
WATCH_EVERY_S = 0.25


class ConsoleApp(HistoryHost, App[None]):
    """The cairnq console over one store."""

    CSS_PATH = Path(__file__).parent / "app.tcss"
    TITLE = "cairnq console"
    BINDINGS = keymap.APP
    COMMANDS = App.COMMANDS | {ConsoleCommands, TargetCommands, PanelCommands}

    def __init__(
        self,
        store: TaskStore,
        settings: Settings,
        *,
        clock: Clock = system_clock,
        measure: Callable[[], float] = time.perf_counter,
        host: WorkerHost | None = None,
        wait_registry: Callable[[], list[WaitSnapshot]] = active_waits,
    ) -> None:
        """Args:
        store: the database (connected by the app if it is not yet).
        settings: what the command line asked for.
        clock: epoch ms for ages and countdowns (fixed in snapshots).
        measure: the stopwatch behind "last refresh cost" (fixed in snapshots).
        host: the workers hosted in this process (``--worker``), already started;
            the caller shuts them down after the app exits.
        wait_registry: the waits in progress (fixed in snapshots).
        """
        super().__init__()
        self.store = store
        self.settings = settings
        self.clock = clock
        self.measure = measure
        self.host = host
        self.hosted_index = 0  # the hosted worker the hosted views' controls act on
        #: The Tasks view's columns as the operator chose them (None: all, in order).
        self.task_columns: list[str] | None = None
        self.wait_registry = wait_registry
        self.inspector = Inspector(store, clock=clock)
        #: Writes go through it (audited into the history file, unless --no-history).
        self.client: CairnQ = self._open_history(store, settings)
        self.controls = ConsoleControls(self)
        self.read_only = settings.read_only
        self.connected = False
        self.meta: dict[str, str] = {}
        self.names: list[str] = []
        self.known_queues: list[str] = []
        self.paused = False
        self.ticks = 0
        self._timer: Timer | None = None
        self._in_flight = False
        self._again = False
        self._last_done = 0.0
        #: Watch signals: one came while a refresh was in flight; the next refresh
        #: was brought forward by one; when the last such refresh started.
        self._woken = False
        self._early_next = False
        self._early_at = -float("inf")
        self._due_at = float("inf")  # when the armed timer fires (monotonic)
        self._unwatch: Any = None
        self._woke_pending = False
        self._quitting = False  # waiting for hosted calls before exiting
        self._heap_frozen = False
        self._gc_threshold: tuple[int, int, int] | None = None  # CPython's, to restore
        self._refresh_started = 0.0
        #: Since when (monotonic) the rows on screen are stale; None while they are live.
        self._stale_since: float | None = None
        if settings.theme:
            self.theme = settings.theme

    # -- layout ------------------------------------------------------------------------

    def on_mount(self) -> None:
        self.push_screen(MainScreen())
        self.connect_store()
        self.set_interval(WATCH_EVERY_S, self._watch_refresh)

    def status_bar(self) -> StatusBar | None:
        """The status bar of the main screen (None before it is composed or after it is
        torn down): everything that draws state goes through here, so a refresh, a
        wakeup or a worker message landing at any moment never looks for a missing bar."""
        for screen in self.screen_stack:
            if isinstance(screen, MainScreen):
                found = screen.query(StatusBar)
                return found.first() if found else None
        return None

    def compose(self) -> ComposeResult:
        return iter(())

    # -- connection ------------------------------------------------------------------------

    @work(exclusive=True, group="connect", exit_on_error=False)
    async def connect_store(self) -> None:
        await self.store.connect()
        meta = await self.inspector.meta()
        names = await self.inspector.names()
        queues = await self.inspector.queues()
        if self._unwatch is None:
            self._unwatch = self.client.watch(
                self._on_signal, queues=list(self.settings.queues) or None, poll_ms=3_600_000
            )
        self.post_message(StoreConnected(meta=meta, names=names, queues=queues))

    def _on_signal(self, signal: WatchSignal) -> None:
        # May run on another thread (a worker on its own loop): post_message is safe.
        # One wakeup in the queue is enough: a hosted worker settling a thousand
        # tasks a second would otherwise queue a thousand messages a second.
        if signal.reason != "poll" and not self._woke_pending:
            self._woke_pending = True
            self.post_message(DatabaseWoke(signal.reason))

    def on_store_connected(self, message: StoreConnected) -> None:
        self.connected = True
        self.meta = message.meta
        self.names = message.names
        self.known_queues = message.queues
        for screen in self.screen_stack:
            if isinstance(screen, MainScreen):
                screen.store_connected(message)
        bar = self.status_bar()
        if bar is not None:
            bar.versions = (
                f"protocol v{message.meta.get('protocol_version', '?')} · "
                f"schema v{message.meta.get('schema_version', '?')}"
            )
        if self.settings.notice:
            self.notify(self.settings.notice, title="New database", markup=False)
        self._start_history()
        self.refresh_now()

    # -- what completes: names and queues seen since connect -----------------------------

    def learn(self, names: Iterable[str] = (), queues: Iterable[str] = ()) -> bool:
        """Add task names and queues seen since connect to what completes and filters.

        Sources: the rows of every Tasks page drawn, and ``read_completions``
        (the database's names and queues, and those the hosted workers handle).
        True when anything was new.
        """
        new_names = set(names).difference(self.names)
        new_queues = set(queues).difference(self.known_queues)
        if not new_names and not new_queues:
            return False
        if new_names:
            self.names = sorted({*self.names, *new_names})
        if new_queues:
            self.known_queues = sorted({*self.known_queues, *new_queues})
        for screen in self.screen_stack:
            if isinstance(screen, MainScreen):
                screen.offer_choices(self.known_queues, self.names)
        return True

    async def read_completions(self) -> tuple[list[str], list[str]]:
        """Read the names and queues the database holds and the hosted workers handle
        (learnt as ``learn`` does); every name and queue known now."""
        names = await self.inspector.names()
        queues = await self.inspector.queues()
        if self.host:
            for status in await self.host.statuses():
                names.extend(status.handles)
                if status.snapshot is not None:
                    queues.extend(status.snapshot.queues)
        self.learn(names, queues)
        return list(self.names), list(self.known_queues)

    async def retarget(self, store: TaskStore, settings: Settings) -> None:
        """Point the running console at another database (``:``), then connect."""
        self.workers.cancel_group(self, "connect")  # the views' workers end with the views
        self.workers.cancel_group(self, "history")
        if self._unwatch is not None:
            self._unwatch()
            self._unwatch = None
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        old = self.store
        self.store, self.settings, self.read_only = store, settings, settings.read_only
        self.inspector = Inspector(store, clock=self.clock)
        self.client = self._open_history(store, settings)
        self.connected = self._in_flight = self._again = False
        if settings.theme:
            self.theme = settings.theme
        while len(self.screen_stack) > 2:  # the default screen, then the main screen
            await self.pop_screen()
        await self.switch_screen(MainScreen())  # fresh views: nothing of the old target
        self.connect_store()
        # A write already confirmed on the old target finishes there before it closes.
        writing = [w for w in self.workers if w.group == "control"]
        if writing:  # (an empty list would mean every worker, this one included)
            await self.workers.wait_for_complete(writing)
        await old.close()

    def action_switch_target(self) -> None:
        pick_target(self)

    async def on_unmount(self) -> None:
        if self._heap_frozen:
            gc.unfreeze()  # what the console built at startup may be collected again
        if self._gc_threshold is not None:
            gc.set_threshold(*self._gc_threshold)
            self._gc_threshold = None
        if self._unwatch is not None:
            self._unwatch()
        self._close_history()
        await self.store.close()

    # -- refresh loop ------------------------------------------------------------------------

    @property
    def dialog_open(self) -> bool:
        return isinstance(self.screen, ModalScreen)

    def refresh_state(self) -> str:
        if not self.connected:
            return "connecting"
        if self._stale_since is not None:
            waited = time.monotonic() - (self._refresh_started if self._in_flight else 0.0)
            if self._in_flight:
                return f"error: database not answering ({waited:.0f}s) · rows shown are stale"
            return "error (retrying) · rows shown are stale"
        if self.paused:
            return "paused (p resumes)"
        if self.dialog_open:
            return "paused while a dialog is open"
        return f"live · every {self.settings.refresh_s:g}s"

    def refresh_now(self, *, force: bool = False) -> None:
        """Start a refresh of the visible view now (or right after the running one)."""
        if self._in_flight and not force:
            self._again = True
            return
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        if not self.connected or not self.screen_stack:  # not yet, or shutting down
            return
        # Paused, only what the operator asks for refreshes (ctrl+r, a filter, a view
        # switch): once, without resuming. A dialog holds every refresh back.
        if (self.paused and not force) or self.dialog_open:
            self._show_state()
            self._arm(self.settings.refresh_s)
            return
        view = self.active_view()
        if view is None:
            self._arm(self.settings.refresh_s)
            return
        self._in_flight = True
        self._refresh_started = time.monotonic()
        self._again = False
        if self._early_next:
            self._early_next = False
            self._early_at = time.monotonic()
        self.ticks += 1
        view.refresh_data()

    def active_view(self) -> DataNode | None:
        """The view that refreshes: the detail screen if shown, else the visible tab."""
        screen = self.screen
        if isinstance(screen, DataNode):
            return screen
        for candidate in reversed(self.screen_stack):
            if isinstance(candidate, MainScreen):
                return candidate.active_view()
        return None

    def refresh_drawn(self, message: DataMessage) -> None:
        """A view drew a refresh result: record its cost and arm the next tick."""
        self._in_flight = False
        self._last_done = time.monotonic()
        self._mark_stale(False)
        bar = self.status_bar()
        if bar is not None:
            bar.cost_ms = message.cost_ms
        self._show_state()
        self.call_after_refresh(self._arm_next)
        self.call_after_refresh(self._collect_young)
        self._history_after_tick()
        if not self._heap_frozen:
            self._heap_frozen = True
            self.call_after_refresh(self._freeze_heap)

    def _freeze_heap(self) -> None:
        """Keep what the console built at startup out of every later full collection.

        A full (oldest generation) collection scans every tracked object: with
        the widgets, styles and modules of the console that is a pause of 50 to
        200 ms, often right between a keypress and its repaint. Frozen objects
        are not scanned; they are unfrozen when the app exits.

        A full collection still scans what was built since (a view's rows and
        rendered lines), and CPython starts one every 10 middle collections once
        that grows by a quarter, which after a freeze is almost always: drawing a
        page of new tasks allocates enough for a young collection every few
        milliseconds, a middle one every few dozen and a full one every second or
        two. Nearly everything the console allocates dies by reference count, so
        the young threshold goes from 700 to ``GC_YOUNG_THRESHOLD``: young
        collections scan a little more each, and every generation runs about
        14 times less often (bench/README.md has the counts). CPython's
        thresholds are restored when the app exits.
        """
        gc.collect()
        gc.freeze()
        threshold = gc.get_threshold()
        if self._gc_threshold is None:
            self._gc_threshold = (threshold[0], threshold[1], threshold[2])
        gc.set_threshold(max(GC_YOUNG_THRESHOLD, threshold[0]), threshold[1], threshold[2])

    def _collect_young(self) -> None:
        """A collection due soon runs now, drawn and idle, not inside a keypress."""
        young, middle, _ = gc.get_count()
        if self._heap_frozen and young >= GC_YOUNG_THRESHOLD // 2:
            gc.collect(1 if middle + 1 > gc.get_threshold()[1] else 0)

    def _arm_next(self) -> None:
        """Arm the tick after a drawn refresh: at once if one was asked for meanwhile."""
        if self._again:
            self._arm(0.0)
            return
        self._arm(self.settings.refresh_s)
        if self._woken:
            self._woken = False
            self._arm_early()

    def _watch_refresh(self) -> None:
        """Say so within about a second when the database stops answering a refresh."""
        if self._in_flight and time.monotonic() - self._refresh_started >= SLOW_REFRESH_S:
            self._mark_stale(True)
            self._show_state()

    def _mark_stale(self, stale: bool) -> None:
        """Dim (or undim) what every screen shows from the database."""
        if stale == (self._stale_since is not None):
            return
        self._stale_since = time.monotonic() if stale else None
        # On the dimmed widgets, not on the screens: a class on a screen restyles
        # every widget in it, and a database slow enough to make the rows stale
        # made the console slower still.
        screens = set(self.screen_stack)  # and the detail screen, kept when left
        if self.is_screen_installed(DETAIL_SCREEN):
            screens.add(self.get_screen(DETAIL_SCREEN))
        for screen in screens:
            for widget in screen.query(STALE_DIMS):
                widget.set_class(stale, "-stale")

    def _arm(self, delay: float) -> None:
        if self._timer is not None:
            self._timer.stop()
        self._early_next = False
        delay = max(delay, 0.001)
        self._due_at = time.monotonic() + delay
        self._timer = self.set_timer(delay, self.refresh_now)

    def _arm_early(self) -> None:
        """Bring the next refresh forward for a watch signal, at most once per period.

        The first signal after a quiet spell refreshes ``EARLY_REFRESH_GAP_S``
        after the last refresh. While signals keep coming (a worker settling a
        thousand tasks a second signals all the time) only one refresh per
        ``EARLY_REFRESH_EVERY_S`` is brought forward: without that limit the
        visible view refreshed four times a second or back to back, and every
        refresh of a page of new tasks is loop time a keypress can wait behind.
        """
        now = time.monotonic()
        wait = max(
            EARLY_REFRESH_GAP_S - (now - self._last_done),
            self._early_at + EARLY_REFRESH_EVERY_S - now,
        )
        if now + wait >= self._due_at:
            return  # the armed tick comes first
        if wait <= 0:
            self._early_next = True
            self.refresh_now()
            return
        self._arm(wait)
        self._early_next = True

    def _show_state(self, state: str | None = None) -> None:
        bar = self.status_bar()
        if bar is not None:
            bar.state = state or self.refresh_state()

    def on_database_woke(self, message: DatabaseWoke) -> None:
        self._woke_pending = False
        if not self.connected or self.paused:
            return
        if self._in_flight:
            self._woken = True  # considered when the refresh in flight is drawn
        else:
            self._arm_early()

    def on_worker_state_changed(self, event: TextualWorker.StateChanged) -> None:
        """The one place a failed worker becomes a notification."""
        if event.state != WorkerState.ERROR:
            return
        error = event.worker.error
        text = redact_dsn(clean(f"{type(error).__name__}: {error}"))
        group = event.worker.group
        if group == "connect":
            self._show_state("error: cannot connect (retrying)")
            self.notify(text, title="Cannot open the database", severity="error", markup=False)
            self.set_timer(max(self.settings.refresh_s, 1.0), self.connect_store)
            return
        if group == "refresh":
            self._in_flight = False
            self._mark_stale(True)
            self._show_state()
            self.notify(text, title="Refresh failed", severity="error", timeout=4, markup=False)
            self._arm(max(self.settings.refresh_s, 1.0))
            return
        self.notify(text, title="Failed", severity="error", markup=False)

    # -- actions --------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if self.read_only and action in keymap.CONTROL_ACTIONS:
            return None  # shown dimmed in the footer, does nothing
        return True

    def on_key(self, event: events.Key) -> None:
        """A control's key pressed in a read-only session says why nothing happens."""
        if not self.read_only:
            return
        active = self.active_bindings.get(event.key)
        if active is None or active.enabled:
            return
        if active.binding.action.split("(")[0] in keymap.CONTROL_ACTIONS:
            self.notify(
                f"{active.binding.description} is disabled: this console was opened "
                "with --read-only.",
                severity="warning",
                timeout=3,
                markup=False,
            )

    def open_task(self, task_id: str | None, *, follow_key: str | None = None) -> None:
        """Show the detail screen of a task (or of whatever ``follow_key`` points at)."""
        if task_id is None and follow_key is None:
            return
        open_detail(self, task_id, follow_key)
        self.refresh_now(force=True)

    def open_queue(self, queue: str) -> None:
        """Show the Tasks view filtered to ``queue``."""
        for screen in self.screen_stack:
            if isinstance(screen, MainScreen):
                screen.open_queue(queue)
                return

    async def action_quit(self) -> None:
        """Quit; with hosted calls in flight, say on screen what their grace means first.

        The hosted workers are then shut down here, with the notice showing,
        rather than after the app has left the screen; ``run_hosting`` prints
        what was abandoned once the terminal is back.
        """
        if self._quitting:
            return
        host = self.host
        notice = None
        if host:
            snapshots = [s.snapshot for s in await host.statuses() if s.snapshot is not None]
            notice = quitting_notice(snapshots, DEFAULT_GRACE_S)
        if notice is None or host is None:
            self.exit()
            return
        self._quitting = True
        self.notify(notice, title="Quitting", severity="warning", timeout=DEFAULT_GRACE_S + 60)
        self._quit_after_host(host)

    @work(group="quit", exit_on_error=False)
    async def _quit_after_host(self, host: WorkerHost) -> None:
        try:
            await host.close(DEFAULT_GRACE_S)
        finally:
            self.exit()

    def action_help(self) -> None:
        if isinstance(self.screen, HelpScreen):
            return
        # Built once per session (and read-only state): the keymap does not change,
        # and composing and laying out every section again cost more than the
        # rest of opening it.
        name = f"help-{'read-only' if self.read_only else 'read-write'}"
        if not self.is_screen_installed(name):
            self.install_screen(HelpScreen(read_only=self.read_only), name)
        self.push_screen(name)

    def action_show_view(self, name: str) -> None:
        while not isinstance(self.screen, MainScreen) and len(self.screen_stack) > 1:
            self.pop_screen()
        if isinstance(self.screen, MainScreen) and not self.screen.show_view(name):
            self.refresh_now(force=True)  # the same view again: a switch refreshes by itself

    def action_toggle_pause(self) -> None:
        self.paused = not self.paused
        self._show_state()
        if not self.paused:
            self.refresh_now()

    def action_refresh_now(self) -> None:
        self.refresh_now(force=True)

    def action_submit(self) -> None:
        self.controls.submit()

    def action_purge(self) -> None:
        self.controls.purge()

    def action_cancel_by_key_prompt(self) -> None:
        self.controls.cancel_by_key()

    def action_retry_by_key_prompt(self) -> None:
        self.controls.retry_by_key()

    def on_control_finished(self, message: ControlFinished) -> None:
        # Summaries quote keys and names from the database: never parse them as markup.
        self.notify(clean(message.summary), severity=message.severity, markup=False)  # type: ignore[arg-type]
        if message.open_task or message.follow_key:
            self.open_task(message.open_task, follow_key=message.follow_key)
        self.refresh_now(force=True)


def _implements_console(app: ConsoleApp) -> Console:
    """(For mypy: ``ConsoleApp`` is what views and screens rely on ...)"""
    return app


def _implements_control_host(app: ConsoleApp) -> ControlHost:
    """(... what the controls rely on ...)"""
    return app


def _implements_switch_host(app: ConsoleApp) -> SwitchHost:
    """(... and what switching targets relies on.)"""
    return app
