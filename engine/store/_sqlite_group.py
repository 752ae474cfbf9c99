"""Group commit for the SQLite store, driven from the writer thread.

Single-statement writes are appended to a queue from the event loop; the first
one finding no drain scheduled posts ``drain`` to the writer thread at once.
The drain takes every write waiting, runs them (one bare, several in one
``BEGIN IMMEDIATE``; ``_sqlite_sync.run_batch``), answers their callers after
the COMMIT, and goes again while writes keep arriving. Because the drain runs
on the writer thread while the loop prepares the next writes, SQLite's work
(which releases the GIL) overlaps the Python work of the callers.

A locked database (another process writing) puts the batch back at the head:
the drain backs off on its own thread — never on the event loop — with new
arrivals joining behind, and fails only the writes whose ``busy_timeout_ms``
budget is spent.
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

from engine.store import _sqlite_sync as sync

#: Batches per drain before it yields the thread to other queued work (a claim
#: session's BEGIN), so a stream of writes cannot starve it.
_BATCHES_PER_DRAIN = 16
_BACKOFF_FIRST_S = 0.001
_BACKOFF_MAX_S = 0.05

Result = tuple[int, sync.Rows]


def backoff(attempt: int) -> float:
    """1 ms doubling to 50 ms, each sleep jittered by x[0.5, 1.5)."""
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
        if future.done():  # the caller was cancelled; its write still landed
            continue
        if isinstance(outcome, BaseException):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)


class GroupCommit:
    """The write queue of one connection.

    Args:
        raw: the writer connection; used only on its own thread.
        post: puts a callable on the writer thread's queue (FIFO with every
            other call on that connection).
        locked_error: the error for a write whose busy budget ran out.
    """

    def __init__(
        self,
        raw: sqlite3.Connection,
        post: Callable[[Callable[[], None]], None],
        locked_error: Callable[[], BaseException],
    ) -> None:
        self._raw = raw
        self._post = post
        self._locked_error = locked_error
        self._queue: collections.deque[Write] = collections.deque()
        self._lock = threading.Lock()
        self._scheduled = False

    def submit(self, sql: str, params: dict[str, Any], budget_s: float) -> asyncio.Future[Result]:
        """Queue a write (event-loop side); the future resolves after its COMMIT."""
        future: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
        self._queue.append(Write(sql, params, future, time.monotonic() + budget_s))
        self.kick()
        return future

    def kick(self) -> None:
        """Make sure a drain is on its way if writes are waiting."""
        with self._lock:
            if self._scheduled or not self._queue:
                return
            self._scheduled = True
        self._post(self._drain)

    @property
    def idle(self) -> bool:
        """No write waiting and no drain scheduled."""
        with self._lock:
            return not self._scheduled and not self._queue

    # -- writer thread ---------------------------------------------------------------

    def _take(self) -> list[Write]:
        items = []
        while self._queue:  # popleft is atomic; appends from the loop go to the right
            items.append(self._queue.popleft())
        return items

    def _drain(self) -> None:
        try:
            for _ in range(_BATCHES_PER_DRAIN):
                with self._lock:
                    # An open transaction belongs to a claim session: nothing may
                    # join it. The session kicks again once it has ended.
                    if not self._queue or self._raw.in_transaction:
                        self._scheduled = False
                        return
                self._run(self._take())
        except BaseException:
            with self._lock:
                self._scheduled = False
            raise
        self._post(self._drain)

    def _run(self, items: list[Write]) -> None:
        attempt = 0
        while True:
            try:
                outcomes = sync.run_batch(self._raw, [(w.sql, w.params) for w in items])
                break
            except sync.Busy:
                now = time.monotonic()
                waiting = []
                for w in items:
                    if w.deadline <= now:
                        self._answer([w], [self._locked_error()])
                    else:
                        waiting.append(w)
                # The batch stays at the head; later arrivals join behind it.
                items = waiting + self._take()
                if not items:
                    return
                soonest = min(w.deadline for w in items) - now
                # Sleeping here blocks only this writer thread, never a loop.
                time.sleep(max(0.0, min(backoff(attempt), soonest)))
                attempt += 1
            except BaseException as exc:
                outcomes = [exc] * len(items)
                break
        self._answer(items, outcomes)

    @staticmethod
    def _answer(items: Sequence[Write], outcomes: Sequence[sync.Outcome]) -> None:
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Result], Any]]] = {}
        for w, outcome in zip(items, outcomes, strict=True):
            by_loop.setdefault(w.future.get_loop(), []).append((w.future, outcome))
        for loop, pairs in by_loop.items():
            # One wakeup per loop per batch, not one per caller.
            with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits
                loop.call_soon_threadsafe(_settle, pairs)
