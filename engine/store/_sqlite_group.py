"""Group commit for the SQLite store.

Single-statement writes are appended to a queue; the first one schedules a
flush with ``call_soon``, so every write the loop's ready callbacks produce in
the meantime (a ``gather`` of submits) joins it. The flush takes every write
waiting and runs them (one bare, several in one ``BEGIN IMMEDIATE``;
``_sqlite_sync.run_batch``) **inline on the event loop**, answering callers
after the COMMIT. Inline is what makes it fast: a thread hop costs more than an
uncontended WAL commit (docs/engine.md, "Stores"), and the writer's ``busy_timeout`` is 0,
so the loop never waits on a lock held elsewhere — it only does SQLite's own
work, as an inline read does. Under ``synchronous=FULL`` a COMMIT also waits for
an fsync, so there every flush goes to the writer thread's drain instead
(``inline=False``); writes arriving meanwhile form the next batch.

When the connection is owned by someone else (a keyed transaction or claim
session on the writer thread) or another process holds the write lock, the
batch goes back at the head of the queue and a *drain* on the writer thread
takes over: it waits for the owner, backs off on BUSY (1 ms doubling to 10 ms,
jittered) with new arrivals joining behind, and fails only writes whose
``busy_timeout_ms`` budget is spent. Nothing ever sleeps on the event loop.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from engine._aio import call_on_loop, resolve
from engine.store import _sqlite_sync as sync

#: Batches per drain before it yields the thread to other queued work (a claim
#: session's BEGIN), so a stream of writes cannot starve it.
_BATCHES_PER_DRAIN = 16
_BACKOFF_FIRST_S = 0.001
#: SQLite hands its write lock to whoever asks first after it is released, not
#: to whoever waited longest: a waiter sleeping 50 ms kept missing it while
#: other processes committed, and one process of a mixed fleet on one file
#: ran ~4x slower than the others. Asking again at least every 10 ms (15 ms
#: with jitter) keeps the share even (bench/fairness_bench.py).
_BACKOFF_MAX_S = 0.01

Result = tuple[int, sync.Rows]


def backoff(attempt: int) -> float:
    """1 ms doubling to 10 ms, each sleep jittered by x[0.5, 1.5)."""
    return min(_BACKOFF_MAX_S, _BACKOFF_FIRST_S * (1 << min(attempt, 10))) * random.uniform(
        0.5, 1.5
    )


@dataclass(slots=True)
class Write:
    """One caller's statement and where its answer goes."""

    sql: str
    params: dict[str, Any]
    future: asyncio.Future[Result]
    deadline: float


def _settle(pairs: Sequence[tuple[asyncio.Future[Result], sync.Outcome]]) -> None:
    for future, outcome in pairs:
        resolve(future, outcome)


class GroupCommit:
    """The write queue of one connection.

    Args:
        raw: the writer connection (serialized threading mode; used by one
            thread at a time, whoever holds ``owner``).
        owner: held by whoever is using ``raw`` — an inline flush, the drain, or
            a writer-thread operation — for exactly as long as it does.
        post: puts a callable on the writer thread's queue (FIFO with every
            other call on that connection).
        locked_error: the error for a write whose busy budget ran out, given
            SQLite's busy error as its cause.
        on_commit: called after each batch that ran (from the thread that ran it).
        inline: flush on the event loop (a COMMIT without fsync, ~30 µs). False
            hands every flush to the writer thread's drain: a COMMIT that fsyncs
            (``synchronous=FULL``, a millisecond or more) must not hold the loop,
            and writes arriving while it runs join the next batch.
    """

    def __init__(
        self,
        raw: sqlite3.Connection,
        owner: threading.Lock,
        post: Callable[[Callable[[], None]], None],
        locked_error: Callable[[BaseException | None], BaseException],
        on_commit: Callable[[], None],
        *,
        inline: bool = True,
    ) -> None:
        self._on_commit = on_commit
        self._inline = inline
        self._raw = raw
        self._owner = owner
        self._post = post
        self._locked_error = locked_error
        self._queue: collections.deque[Write] = collections.deque()
        self._lock = threading.Lock()
        self._draining = False
        self._flush_scheduled = False
        #: Callers of this process waiting for the connection (a keyed transaction,
        #: a claim session). A drain defers to them: see ``waiting``.
        self._waiters = 0

    def submit(self, sql: str, params: dict[str, Any], budget_s: float) -> asyncio.Future[Result]:
        """Queue a write (event-loop side); the future resolves after its COMMIT."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Result] = loop.create_future()
        self._queue.append(Write(sql, params, future, time.monotonic() + budget_s))
        if not self._flush_scheduled:
            # Not straight to the writer thread, even under FULL: woken by the
            # first write of a gather, it asked for the GIL and took it from
            # the loop mid-gather (switch interval), and 1.45 batches (fsyncs)
            # per gather of 64 were measured instead of 1. The flush callback
            # runs after every ready task's step, so the batch holds them all.
            self._flush_scheduled = True
            loop.call_soon(self._flush)
        return future

    def kick(self) -> None:
        """Hand waiting writes to the writer thread (after the owner let go)."""
        with self._lock:
            # A scheduled inline flush will take them (and kicks if it cannot);
            # a caller waiting for the connection goes first, and kicks after.
            if self._draining or self._flush_scheduled or not self._queue or self._waiters:
                return
            self._draining = True
        self._post(self._drain)

    def waiting(self, change: int) -> None:
        """A caller starts (+1) or stops (-1) waiting for the connection.

        Without this a steady stream of group writes starved such a caller: the
        drain let go of the connection between batches only for an instant, and
        a caller asking every few milliseconds from its loop kept missing it
        until its busy budget ran out. So while anyone waits, a drain ends after
        its current batch and no new one starts; the caller's release kicks the
        queue again, as does a caller that gives up.
        """
        with self._lock:
            self._waiters += change
        if change < 0:
            self.kick()

    @property
    def idle(self) -> bool:
        """No write waiting, no flush or drain on its way."""
        with self._lock:
            return not (self._draining or self._flush_scheduled or self._queue)

    def _take(self) -> list[Write]:
        items = []
        while self._queue:  # popleft is atomic; appends from loops go to the right
            items.append(self._queue.popleft())
        return items

    # -- event loop ------------------------------------------------------------------

    def _flush(self) -> None:
        with self._lock:
            self._flush_scheduled = False
            if self._draining or not self._queue:
                return  # the writer thread's drain will take them
        if not self._inline or not self._owner.acquire(blocking=False):
            self.kick()
            return
        items = self._take()
        outcomes: list[sync.Outcome] | None
        try:
            outcomes = sync.run_batch(self._raw, [(w.sql, w.params) for w in items])
        except sync.Busy:
            # Another process is writing: back at the head, waited out off-loop.
            self._queue.extendleft(reversed(items))
            outcomes = None
        except BaseException as exc:
            outcomes = [exc] * len(items)
        finally:
            self._owner.release()
        if outcomes is None:
            self.kick()
        else:
            self._on_commit()
            self._answer(items, outcomes)
            if self._queue:
                self.kick()  # written by another thread's loop meanwhile

    # -- writer thread ---------------------------------------------------------------

    def _drain(self) -> None:
        try:
            for _ in range(_BATCHES_PER_DRAIN):
                with self._lock:
                    if not self._queue:
                        self._draining = False
                        return
                # A claim session owns the connection across several calls on
                # this thread: waiting here would deadlock it. Its end kicks.
                if not self._owner.acquire(blocking=False):
                    with self._lock:
                        self._draining = False
                    return
                try:
                    items, outcomes = self._run(self._take())
                finally:
                    self._owner.release()
                self._on_commit()
                with self._lock:
                    # Decided before answering, so that once the loops are woken
                    # this thread has nothing left to do but sleep: a loop
                    # waking for its answer would otherwise wait for the GIL.
                    # A caller waiting for the connection kicks again on release.
                    done = bool(self._waiters) or not self._queue
                    if done:
                        self._draining = False
                self._answer(items, outcomes, off_loop=True)
                if done:
                    return
        except BaseException:
            with self._lock:
                self._draining = False
            raise
        self._post(self._drain)  # let other queued calls (a session's BEGIN) have a turn

    def _run(self, items: list[Write]) -> tuple[list[Write], Sequence[sync.Outcome]]:
        """Run one batch, waiting out another process's lock; what to answer.

        Writes whose busy budget ran out meanwhile are answered here, at once.
        """
        attempt = 0
        while True:
            try:
                outcomes = sync.run_batch(self._raw, [(w.sql, w.params) for w in items])
                break
            except sync.Busy as busy:
                now = time.monotonic()
                waiting = []
                for w in items:
                    if w.deadline <= now:
                        self._answer([w], [self._locked_error(busy.__cause__)], off_loop=True)
                    else:
                        waiting.append(w)
                # The batch stays at the head; later arrivals join behind it.
                items = waiting + self._take()
                if not items:
                    return [], []
                soonest = min(w.deadline for w in items) - now
                # Sleeping here blocks only this writer thread, never a loop.
                time.sleep(max(0.0, min(backoff(attempt), soonest)))
                attempt += 1
            except BaseException as exc:
                outcomes = [exc] * len(items)
                break
        return items, outcomes

    @staticmethod
    def _answer(
        items: Sequence[Write], outcomes: Sequence[sync.Outcome], *, off_loop: bool = False
    ) -> None:
        """Settle the callers' futures: one wakeup per loop per batch.

        ``off_loop``: called on the writer thread, where no loop runs, so every
        answer is posted (``call_soon_threadsafe``) without asking which loop
        is running here.
        """
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Result], Any]]] = {}
        for w, outcome in zip(items, outcomes, strict=True):
            by_loop.setdefault(w.future.get_loop(), []).append((w.future, outcome))
        for loop, pairs in by_loop.items():
            if off_loop:
                with contextlib.suppress(RuntimeError):  # closed: nobody waits any more
                    loop.call_soon_threadsafe(_settle, pairs)
            else:
                call_on_loop(loop, _settle, pairs)
