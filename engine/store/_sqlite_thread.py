"""The SQLite writer's thread: one thread, a queue of jobs, answers posted back to loops.

Everything that may wait on the writer connection runs here, never on an event
loop: opening and migrating (they wait on ``busy_timeout``), COMMITs that fsync
under ``synchronous=FULL``, group-commit drains that wait out another process's
lock. Jobs run one at a time in the order they were posted.

The hand-off is kept as cheap as the platform allows, since a sequential write
pays it twice (there and back) on top of its fsync (docs/engine.md, "Stores"):

* **There**: ``queue.SimpleQueue`` (C, no Python-level lock or condition), so
  posting a job costs one append, and wakes the thread only if it sleeps.
* **Back**: ``loop.call_soon_threadsafe``, one per answer; a group-commit batch
  answers each loop once for all of its callers (``_sqlite_group``).
* **Batching** is the group commit's: writes that arrive while a job runs wait
  in its queue and the next drain takes them all into one transaction.

The thread keeps no reference to a job once it ran, so a store dropped without
``close()`` can be collected; its ``WriterThread`` then stops the thread
(``weakref.finalize``). It is a daemon thread, so an interpreter that exits
with a store still open (a job mid-COMMIT at most, which SQLite's journal makes
safe) is never held up by it.

This replaces aiosqlite, whose thread the store used through private
attributes (``_execute``, ``_tx``, ``_conn``, ``_thread``): the store needs to
run whole units of work on the thread and to post jobs from the thread itself,
which aiosqlite's public API does not offer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

from engine._aio import resolve

R = TypeVar("R")

log = logging.getLogger(__name__)

Job = Callable[[], None]


class _Stop:
    """The job that ends the thread (after every job posted before it)."""


def _run(jobs: queue.SimpleQueue[Job | _Stop]) -> None:
    # Holds only the queue: never the WriterThread, never a job it already ran.
    while True:
        job = jobs.get()
        if isinstance(job, _Stop):
            return
        try:
            job()
        except BaseException:  # a posted job has no caller to raise to
            log.exception("a job on the SQLite writer thread failed")
        del job


def _answer(loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any], outcome: Any) -> None:
    with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits any more
        loop.call_soon_threadsafe(resolve, future, outcome)


class WriterThread:
    """One thread that runs jobs in order: posted ones, and ones a coroutine awaits.

    Args:
        name: the thread's name (shown in thread dumps).
    """

    def __init__(self, name: str = "cairnq-sqlite-writer") -> None:
        self._jobs: queue.SimpleQueue[Job | _Stop] = queue.SimpleQueue()
        self._thread = threading.Thread(target=_run, args=(self._jobs,), name=name, daemon=True)
        self._thread.start()
        # Dropped without stop(): end the thread with the object.
        self._finalizer = weakref.finalize(self, self._jobs.put, _Stop())

    @property
    def ident(self) -> int | None:
        """The thread's identifier (tests and diagnostics)."""
        return self._thread.ident

    def on_thread(self) -> bool:
        """True when called from this thread."""
        return threading.get_ident() == self._thread.ident

    def post(self, job: Job) -> None:
        """Queue ``job`` (from any thread, the writer thread included); no answer.

        A job that raises is logged: nobody waits for it.
        """
        self._jobs.put(job)

    async def call(self, fn: Callable[..., R], *args: Any) -> R:
        """Run ``fn(*args)`` on the thread and return (or raise) what it did.

        The job runs to its end even if the caller is cancelled meanwhile (a
        COMMIT is never cut short); its outcome is then dropped.
        """
        if not self._finalizer.alive:
            raise RuntimeError("the SQLite writer thread was stopped")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[R] = loop.create_future()

        def job() -> None:
            try:
                outcome: Any = fn(*args)
            except BaseException as exc:
                outcome = exc
            _answer(loop, future, outcome)

        self._jobs.put(job)
        return await future

    async def stop(self) -> None:
        """Run every job posted so far, then end the thread (without blocking the loop)."""
        if not self._thread.is_alive():
            return
        await self.call(lambda: None)  # every earlier job has run
        self._finalizer()  # posts the stop, once
        # The thread has at most a few bytecodes left; join is immediate.
        self._thread.join(1.0)
