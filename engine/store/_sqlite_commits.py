"""Wakeups from other connections' commits on a SQLite file.

The in-process hub (``_signals``) only hears writes made in this process; a
worker or waiter in another process would see new work at its next poll (500 ms
by default). ``PRAGMA data_version`` tells, in one inline read of ~10 µs,
whether any *other* connection committed since the last look. It is read on the
store's writer connection, whose own commits never change it: writes through
this store already signal in-process.

When to read it:

* **File-change notifications** (Linux inotify, via ``inotify_simple``, on the
  database's directory; the descriptor sits on the event loop, no thread). A
  commit writes its frames to the ``-wal`` file, which raises an event, and only
  then (after its fsync) publishes itself in the shared-memory index, which
  raises none. So an event starts a burst of reads, 0.5-1 ms apart and then
  backing off to 16 ms, until ``BURST_S`` has passed since the last event (a
  burst outlives a stopped watch: the next sleeper resumes it). Our own commits
  raise events too; their bursts find nothing and cost ~70 reads of ~10 µs.
* **Polling** every ``TICK_S`` where notifications are unavailable (not Linux,
  the package missing, no inotify instances left, a loop without
  ``add_reader``).

One watch per event loop; it runs only while someone sleeps on it. Sleepers are
``Wake`` objects added synchronously, and ``data_version`` is read when the
watch starts (after the notification is armed), so a commit after a
sleeper was added always changes what the watch reads next; the last version
read is kept while the watch is stopped, so a commit made while nobody slept
fires the next sleeper at once (a spurious wake at worst). A wake only ends a
sleep early (the sleeper re-checks what it waits for); it never replaces the
timeout, so a missed or spurious wake costs nothing but one poll.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from engine.store._signals import Wake

try:  # Linux only; elsewhere the watch polls.
    import inotify_simple as _inotify
except Exception:  # pragma: no cover - import fails off Linux or without the package
    _inotify = None

#: Poll period where notifications are unavailable; bounds that wakeup latency.
TICK_S = 0.015
#: After a file event, how long to keep re-reading ``data_version`` for the commit to publish.
BURST_S = 1.0
_BURST_STEPS_S = (0.0005, 0.001, 0.001, 0.002, 0.002, 0.004, 0.008, 0.016)
#: Set False to force polling (tests of the fallback; a filesystem known to drop events).
NOTIFICATIONS = True


def notifications_available() -> bool:
    """Whether this platform can notify file changes (inotify, the package importable)."""
    return NOTIFICATIONS and _inotify is not None


class CommitWatch:
    """Sleepers of one event loop waiting for another connection's commit.

    Args:
        read_version: the current ``data_version``, or None when it cannot be
            read right now (the connection is busy elsewhere; read again soon).
        path: the database file (its directory is watched); None: poll only.
        initial: a version read earlier (the store's last), the baseline
            should the first look find the connection busy.
    """

    def __init__(
        self,
        read_version: Callable[[], int | None],
        path: str | None = None,
        initial: int | None = None,
    ) -> None:
        self._read = read_version
        self._path = path
        self._names: frozenset[str] = frozenset()
        if path is not None:
            base = os.path.basename(path)
            self._names = frozenset({base, f"{base}-wal", f"{base}-journal"})
        self._sleepers: set[Wake] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._seen: int | None = initial
        self._running = False
        # The inotify instance lives as long as the watch: closing one waits for
        # the kernel (~10-20 ms), so it is read only while someone sleeps and
        # closed off the loop when the store closes.
        self._notify: Any = None
        self._notify_failed = False
        self._closers: list[threading.Thread] = []
        self._timer: asyncio.TimerHandle | None = None
        self._burst_until = 0.0
        self._burst_step = 0
        #: How the running watch learns of commits: "notify", "poll" or None (stopped).
        self.mode: str | None = None

    def add(self, wake: Wake) -> None:
        """Fire ``wake`` at the next foreign commit seen; unregistered when it is closed."""
        self._loop = wake.loop
        self._sleepers.add(wake)
        wake.on_close(lambda: self._discard(wake))
        if not self._running:
            self._start()

    def _discard(self, wake: Wake) -> None:
        self._sleepers.discard(wake)
        if not self._sleepers and self._running:
            self._halt()

    def close(self) -> None:
        """Wake every sleeper and stop watching (the store is closing).

        Safe from any thread: the watch's own loop does the work. A loop that
        is already closed has nothing left to run, so nothing is left pending.
        """
        loop = self._loop
        if loop is None or loop.is_closed():
            self._release()  # nothing runs there any more; just let the instance go
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self._stop()
        else:
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(self._stop)

    def _stop(self) -> None:
        self._fire_all()
        self._halt()
        self._release()

    # -- running ------------------------------------------------------------------------

    def _start(self) -> None:
        self._running = True
        if not self._arm_notifications():
            self.mode = "poll"
            self._schedule(TICK_S)
        # After arming, look once: a commit from here on raises an event (or is
        # seen by the next poll), and one since the watch last looked (while no
        # one slept, e.g. between a worker's claim and its next sleep) fires now.
        if self._check() or self.mode != "notify":
            return
        # Events queued while no one slept, or a burst cut short when the last
        # sleeper woke, may stand for a commit whose frames are written but not
        # yet published (its fsync still running): go on reading for it.
        self._on_events()
        loop = self._loop
        assert loop is not None
        if self._running and self._timer is None and loop.time() < self._burst_until:
            self._schedule(_BURST_STEPS_S[self._burst_step])

    def _arm_notifications(self) -> bool:
        loop = self._loop
        if self._path is None or loop is None or not notifications_available():
            return False
        notify = self._notify
        if notify is None:
            assert _inotify is not None
            if self._notify_failed:
                return False
            try:
                notify = _inotify.INotify(nonblocking=True)
            except OSError:
                self._notify_failed = True  # out of instances, or no inotify here
                return False
            try:
                mask = _inotify.flags.MODIFY | _inotify.flags.CREATE | _inotify.flags.MOVED_TO
                notify.add_watch(os.path.dirname(self._path) or ".", mask)
            except OSError:
                self._notify_failed = True
                self._closers.append(_close_later(notify))
                return False
            self._notify = notify
            # A store dropped without close(): give the instance back with the watch.
            weakref.finalize(self, _close_quietly, notify)
        try:
            loop.add_reader(notify.fileno(), self._on_events)
        except (OSError, NotImplementedError, RuntimeError):
            self._notify_failed = True
            self._notify = None
            self._closers.append(_close_later(notify))
            return False
        self.mode = "notify"
        return True

    def _halt(self) -> None:
        self._running = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        notify, loop = self._notify, self._loop
        armed = self.mode == "notify" and notify is not None
        if armed and loop is not None and not loop.is_closed():
            loop.remove_reader(notify.fileno())
        self.mode = None

    def _release(self) -> None:
        """Give the inotify instance back (the store is closing)."""
        notify, self._notify = self._notify, None
        if notify is not None:
            self._closers.append(_close_later(notify))

    async def released(self, timeout_s: float = 1.0) -> None:
        """Return once the instance is given back: a store's close leaves no thread.

        Sleeps on the caller's loop while the closing thread finishes (or, for a
        watch of another loop, until that loop has released it); bounded by
        ``timeout_s`` so a stuck kernel close cannot hang a shutdown.
        """
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self._closers = [c for c in self._closers if c.is_alive()]
            if not self._closers and self._notify is None:
                return
            await asyncio.sleep(0.002)

    def _schedule(self, delay_s: float) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer = loop.call_later(delay_s, self._on_timer)

    def _on_events(self) -> None:
        notify = self._notify
        if notify is None:
            return
        try:
            events = notify.read(timeout=0)
        except OSError:
            events = []
        if not any(event.name in self._names for event in events):
            return
        # One read may bring the events of several commits (say a claim that
        # is published and the next write, still in its fsync): keep reading
        # for BURST_S after the last event, even past a change.
        loop = self._loop
        assert loop is not None
        self._burst_until = loop.time() + BURST_S
        self._burst_step = 0
        self._check()
        if self._running:
            self._schedule(_BURST_STEPS_S[0])

    def _on_timer(self) -> None:
        self._timer = None
        if not self._running:
            return
        changed = self._check()
        if not self._running:
            return
        if self.mode == "poll":
            self._schedule(TICK_S)
            return
        loop = self._loop
        assert loop is not None
        if loop.time() >= self._burst_until:
            return
        self._burst_step = 0 if changed else min(self._burst_step + 1, len(_BURST_STEPS_S) - 1)
        self._schedule(_BURST_STEPS_S[self._burst_step])

    def _check(self) -> bool:
        """Read ``data_version``; wake everyone and return True if it moved.

        The version last read is kept while the watch is stopped, so the first
        look of a restarted watch compares with it.
        """
        version = self._read()
        if version is None:
            if self._timer is None and self._running:
                self._schedule(_BURST_STEPS_S[0])  # busy: look again soon
            return False
        seen, self._seen = self._seen, version
        # With no baseline at all (never read before), a change may be hidden: wake.
        if seen is None or version != seen:
            self._fire_all()
            return True
        return False

    def _fire_all(self) -> None:
        woken, self._sleepers = self._sleepers, set()
        for wake in woken:
            wake.set()
        if self._running and not self._sleepers:
            self._halt()


def _close_later(notify: Any) -> threading.Thread:
    """Close an inotify instance on a short-lived thread (the close can take ~10-20 ms)."""
    closer = threading.Thread(target=notify.close, name="cairnq-inotify-close", daemon=True)
    closer.start()
    return closer


def _close_quietly(notify: Any) -> None:
    with contextlib.suppress(OSError):
        notify.close()  # a no-op when _release closed it already
