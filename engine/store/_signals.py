"""In-process wakeups: a submit wakes a claiming worker, a completion wakes a waiter.

Both dialects feed this hub from their own committed writes; the Postgres store
also feeds it from LISTEN notifications of other processes. Wakeups only shorten
sleeps: every sleep keeps its timeout, so polling stays correct without them.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import threading
import weakref
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from engine._aio import call_on_loop
from engine._models import Task

SignalReason = Literal["queued", "done", "poll"]
#: What a process can wait for: a claimable task ("queued"), a terminal one ("done").
SignalKind = Literal["queued", "done"]


@dataclass(frozen=True, slots=True)
class WatchSignal:
    """What ``CairnQ.watch`` hands its consumer."""

    reason: SignalReason
    queue: str | None = None
    task_id: str | None = None


class Wake:
    """One armed wake-up: a future of the loop that waits on it, settable from any thread.

    Armed synchronously (``Signals.arm_done`` / ``arm_claim``), so a caller that
    arms it *before* looking at the database cannot miss a signal sent after
    the look. ``woken`` waits on it once; ``close`` unregisters it everywhere it
    was registered (the hub, a store's commit watch).
    """

    __slots__ = ("_closers", "_future", "about_it", "loop", "task")

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self._future: asyncio.Future[bool] = self.loop.create_future()
        self._closers: list[Callable[[], None]] = []
        #: The terminal row a completion in this process committed, when the
        #: signal carried it (a waiter then needs no read); else None.
        self.task: Task | None = None
        #: Fired by a signal about what it waits for (its task's "done"), not by
        #: a commit anywhere in the database (another process's, on SQLite) or
        #: a release: the waiter may then read the full row at once.
        self.about_it = False

    def set(self, task: Task | None = None, *, about_it: bool = False) -> None:
        call_on_loop(self.loop, self._fire, task, about_it)

    def _fire(self, task: Task | None = None, about_it: bool = False) -> None:
        if not self._future.done():
            self.task = task
            self.about_it = about_it
            self._future.set_result(True)
        elif task is not None and self.task is None and self._future.result():
            # A notification without the row (Postgres' echo of our own commit)
            # came first; the row still helps if the waiter has not run yet.
            self.task = task

    @property
    def fired(self) -> bool:
        """Whether ``set`` came (False also after a timeout)."""
        return self._future.done() and not self._future.cancelled() and self._future.result()

    def on_close(self, closer: Callable[[], None]) -> None:
        """Run ``closer`` when this wake is closed (unregister it somewhere)."""
        self._closers.append(closer)

    async def woken(self, timeout_ms: float) -> bool:
        """Wait up to ``timeout_ms``; True if ``set`` came first (or before the call)."""
        future = self._future
        if not future.done():
            timer = self.loop.call_later(max(0.0, timeout_ms) / 1000, _expire, future)
            try:
                await future
            finally:
                timer.cancel()
        return future.result()

    def close(self) -> None:
        """Unregister; later signals are dropped. Idempotent."""
        closers, self._closers = self._closers, []
        for closer in closers:
            closer()


class Claimer:
    """One claimer's place in the "queued" signals: what its last look already covered.

    A worker keeps one and hands it to its claims and its claim wakes: a
    signal that came after its last claim began fires its next wake at once,
    whoever else that signal woke or whoever armed first. (One mark per queue,
    taken by the first claimer to arm, left a second busy worker of the
    process asleep for its whole poll interval with a task waiting.) Callers
    that pass none share the hub's own.
    """

    __slots__ = ("seen",)

    def __init__(self) -> None:
        #: Per queue, the hub's count of "queued" signals when this claimer last looked.
        self.seen: dict[str, int] = {}


def _expire(future: asyncio.Future[bool]) -> None:
    if not future.done():
        future.set_result(False)


#: Registered own writers past which the closed ones are dropped on the next registration.
_OWN_WRITERS_PRUNED_AT = 64

_shared: weakref.WeakValueDictionary[str, Signals] = weakref.WeakValueDictionary()
_shared_lock = threading.Lock()


class Signals:
    """Waiters keyed by queue and by task id, plus watch subscribers.

    One instance is shared by every store handle on the same database in this
    process (``Signals.shared``), so a client's submit wakes a worker that opened
    its own handle, even when that worker runs its own event loop on a thread.
    """

    @classmethod
    def shared(cls, identity: str) -> Signals:
        """The process-wide hub for one database (a file's real path, a DSN + schema)."""
        with _shared_lock:
            hub = _shared.get(identity)
            if hub is None:
                hub = cls()
                _shared[identity] = hub
            return hub

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue_waiters: dict[str, set[Wake]] = defaultdict(set)
        self._done_waiters: dict[str, set[Wake]] = defaultdict(set)
        # Queues someone claims from, each with its count of "queued" signals: a
        # claimer whose last look came before the latest one wakes at once.
        self._queued_count: dict[str, int] = {}
        self._claimed_queues: set[str] = set()
        self._anyone = Claimer()
        self._subscribers: list[Callable[[WatchSignal], None]] = []
        # Backend pids of this process's connections to the database (Postgres),
        # each with a test of whether that connection is still open.
        self._own_writers: dict[int, Callable[[], bool]] = {}
        # The kinds someone in this process has waited for or watched, and who
        # subscribes to another process's signals as they become wanted.
        self._wanted: set[SignalKind] = set()
        self._on_wanted: list[Callable[[SignalKind], None]] = []

    # -- what this process listens for --------------------------------------------------

    @property
    def wanted(self) -> frozenset[SignalKind]:
        """The kinds of signal someone in this process has waited for or watched."""
        with self._lock:
            return frozenset(self._wanted)

    def on_wanted(self, callback: Callable[[SignalKind], None]) -> Callable[[], None]:
        """Call ``callback(kind)`` (from any thread) when a kind is first wanted.

        Postgres subscribes a channel only once its kind is wanted: every NOTIFY
        on a channel a connection LISTENs to wakes that process, and a worker
        that never waits for a task, or an API process that never claims, has
        nothing to do with the other channel's signals but wake for them while
        the process that needs the CPU waits on them. Returns the unsubscriber.
        """
        with self._lock:
            self._on_wanted.append(callback)

        def remove() -> None:
            with self._lock:
                if callback in self._on_wanted:
                    self._on_wanted.remove(callback)

        return remove

    def _want(self, kind: SignalKind) -> None:
        if kind in self._wanted:  # read without the lock: set once, never unset
            return
        with self._lock:
            if kind in self._wanted:
                return
            self._wanted.add(kind)
            callbacks = list(self._on_wanted)
        for callback in callbacks:
            callback(kind)

    def heard_from_now(self, kind: SignalKind) -> None:
        """Another process's ``kind`` signals are heard from now on (a LISTEN took effect).

        One sent before was missed: every waiter of that kind looks again, and
        a claimer between two sleeps finds its next wake already fired.
        """
        with self._lock:
            if kind == "queued":
                for queue in self._claimed_queues:
                    self._count_queued(queue)
            waiters = self._waiters_of(kind)
        for waiter in waiters:
            waiter.set()

    def _waiters_of(self, *kinds: SignalKind) -> list[Wake]:
        """Every armed wake of ``kinds`` (under ``_lock``)."""
        tables = {"queued": self._queue_waiters, "done": self._done_waiters}
        return [w for kind in kinds for group in tables[kind].values() for w in group]

    def add_own_writer(self, backend_pid: int, open_now: Callable[[], bool]) -> None:
        """A connection of this process whose committed writes the hub hears in-process.

        Every store write signals here once it committed, so the database's
        notification of the same commit (Postgres NOTIFY, sent by the server
        process ``backend_pid``) is an echo: ``is_own_writer`` lets the
        listener drop it. ``open_now`` tells whether the connection is still
        open; once it is closed the pid is forgotten (the server may hand it to
        another client's connection).
        """
        with self._lock:
            if len(self._own_writers) >= _OWN_WRITERS_PRUNED_AT:
                # Pools replace connections over time: forget the closed ones.
                for pid, still_open in list(self._own_writers.items()):
                    if not still_open():
                        del self._own_writers[pid]
            self._own_writers[backend_pid] = open_now

    def is_own_writer(self, backend_pid: int) -> bool:
        """Whether ``backend_pid`` is an open connection registered by ``add_own_writer``."""
        with self._lock:
            open_now = self._own_writers.get(backend_pid)
            if open_now is None:
                return False
            if open_now():
                return True
            del self._own_writers[backend_pid]
            return False

    def queued(self, queue: str) -> None:
        """A task became claimable on ``queue`` (insert, requeue, retry)."""
        with self._lock:
            waiters = list(self._queue_waiters.get(queue, ()))
            if queue in self._claimed_queues:
                self._count_queued(queue)
        for waiter in waiters:
            waiter.set()
        self._publish(WatchSignal("queued", queue=queue))

    def _count_queued(self, queue: str) -> None:
        """One more "queued" signal on ``queue`` (under ``_lock``)."""
        self._queued_count[queue] = self._queued_count.get(queue, 0) + 1

    def done(self, task_id: str, task: Task | None = None) -> None:
        """Task ``task_id`` entered a terminal status; ``task``: the row as committed, if known."""
        with self._lock:
            waiters = list(self._done_waiters.get(task_id, ()))
        for waiter in waiters:
            waiter.set(task, about_it=True)
        self._publish(WatchSignal("done", task_id=task_id))

    def release_all(self) -> None:
        """Wake every waiter (a dropped listener, a closing store)."""
        with self._lock:
            everyone = self._waiters_of("queued", "done")
        for waiter in everyone:
            waiter.set()

    def subscribe(self, consumer: Callable[[WatchSignal], None]) -> Callable[[], None]:
        """Call ``consumer`` for every signal until the returned function is called."""
        self._want("queued")
        self._want("done")
        self._subscribers.append(consumer)

        def unsubscribe() -> None:
            if consumer in self._subscribers:
                self._subscribers.remove(consumer)

        return unsubscribe

    def _publish(self, signal: WatchSignal) -> None:
        for consumer in list(self._subscribers):
            # A consumer's exception is its own business, never the writer's.
            with contextlib.suppress(Exception):
                consumer(signal)

    def claiming(self, queues: Iterable[str], claimer: Claimer | None = None) -> None:
        """``claimer`` (None: the hub's own) looks at ``queues`` now: their signals so far are seen.

        Called at the start of every claim, before its look: a signal that
        arrives after it, before the claimer arms its next wake, fires that
        wake at once (the protocol registers the queues at the first claim).
        """
        self._want("queued")
        seen = (claimer or self._anyone).seen
        with self._lock:
            for q in queues:
                self._claimed_queues.add(q)
                seen[q] = self._queued_count.get(q, 0)

    def arm_claim(self, queues: Iterable[str], claimer: Claimer | None = None) -> Wake:
        """A wake fired when a task becomes claimable on one of ``queues``.

        Fired at once when such a signal came since ``claimer`` (None: the
        hub's own) last looked at these queues or armed for them.
        """
        names = list(queues)
        seen = (claimer or self._anyone).seen
        wake = Wake()
        self._want("queued")
        with self._lock:
            missed = False
            for q in names:
                self._claimed_queues.add(q)
                count = self._queued_count.get(q, 0)
                missed = missed or seen.get(q, 0) != count
                seen[q] = count
                self._queue_waiters[q].add(wake)
            if missed:
                wake._fire()

        def leave() -> None:
            with self._lock:
                for q in names:
                    _leave(self._queue_waiters, q, wake)

        wake.on_close(leave)
        return wake

    def arm_done(self, task_id: str) -> Wake:
        """A wake fired when ``task_id`` enters a terminal status."""
        wake = Wake()
        self._want("done")
        with self._lock:
            self._done_waiters[task_id].add(wake)

        def leave() -> None:
            with self._lock:
                _leave(self._done_waiters, task_id, wake)

        wake.on_close(leave)
        return wake


def _leave(table: dict[str, builtins.set[Wake]], key: str, wake: Wake) -> None:
    """Drop ``wake`` from ``table[key]``, and the key once no one waits there."""
    waiters = table.get(key)
    if waiters is not None:
        waiters.discard(wake)
        if not waiters:
            del table[key]
