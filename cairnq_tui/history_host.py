"""The console app's side of the history file: open it per target, sample it,
write through its audited client, close it (mixed into ``ConsoleApp``).

A sample starts right after a refresh tick has drawn (``_history_after_tick``),
once ``SAMPLE_EVERY_S`` has passed: the next tick is a refresh period away, so a
sample never runs beside a tick. A timer samples too when ticks stop (paused,
a dialog open) and no sample came for half a period more.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from textual import work
from textual.timer import Timer

from cairnq_tui.history import SAMPLE_EVERY_S, HistorySession, history_for
from engine import CairnQ, TaskStore

if TYPE_CHECKING:
    from cairnq_tui.clock import Clock
    from engine.inspection import Inspector


class HistoryHost:
    """Mixin (before ``App``) of the console app."""

    history: HistorySession | None = None
    _history_error: str | None = None
    _history_timer: Timer | None = None
    #: When the next sample is due (``time.monotonic()``).
    _history_due: float = 0.0

    if TYPE_CHECKING:
        inspector: Inspector
        clock: Clock
        connected: bool
        _quitting: bool

    def _open_history(self, store: TaskStore, settings: Any) -> CairnQ:
        """The target's history file (unless --no-history), and the client to write through."""
        self._close_history()
        self.history, client, self._history_error = history_for(
            settings, store, self.inspector, self.clock
        )
        return client

    def _start_history(self) -> None:
        """Once connected: say why there is no file, if one failed; sample now and on."""
        app: Any = self  # (an App: notify and set_interval are Textual's)
        if self._history_error:
            app.notify(self._history_error, title="No history file", severity="warning")
            self._history_error = None
        if self._history_timer is None:
            self._history_timer = app.set_interval(SAMPLE_EVERY_S, self._history_lapsed)
        self._history_due = time.monotonic() + SAMPLE_EVERY_S
        self._sample_history()

    def _history_after_tick(self) -> None:
        """A refresh tick drew: sample once the frame is painted, if one is due (the
        next tick is a refresh period away)."""
        if self.history is not None and time.monotonic() >= self._history_due:
            self._history_due = time.monotonic() + SAMPLE_EVERY_S
            app: Any = self
            app.call_after_refresh(self._sample_history)

    def _history_lapsed(self) -> None:
        """No tick sampled for half a period past due: sample anyway."""
        if self.history is not None and time.monotonic() >= self._history_due + SAMPLE_EVERY_S / 2:
            self._history_due = time.monotonic() + SAMPLE_EVERY_S
            self._sample_history()

    def _close_history(self) -> None:
        if self.history is not None:
            self.history.close()
            self.history = None

    @work(exclusive=True, group="history", exit_on_error=False)
    async def _sample_history(self) -> None:
        if self.history is not None and self.connected and not self._quitting:
            await self.history.sample()
