"""The worker's own threads for plain-function (``def``) handlers.

A ``def`` handler cannot be interrupted. Past ``max_run_ms`` the worker gives
up on the call, but the function runs on in its thread until it returns. On
the loop's default executor such a thread kept one of its few seats (``cpus +
4``): a handful of hung calls and every later ``def`` call queued behind them
and timed out too, and ``asyncio.run`` and the interpreter's exit waited for
them (an hour, for a handler sleeping an hour).

Here each call runs on a thread of the worker's: an idle one when there is one,
else a new one. A call the worker gives up on leaves its thread *abandoned*:
counted, listed in the snapshot, never waited for; the next call simply gets
another thread. When an abandoned function returns at last, its outcome is
dropped and the thread goes back to work. Every thread is a daemon, so neither
``run()``, ``serve()`` nor the interpreter's exit waits on a handler.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import itertools
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine._clock import now_ms
from engine._worker_snapshot import AbandonedThread

_thread_numbers = itertools.count(1)


@dataclass(slots=True, eq=False)
class _Job:
    """One function call handed to a thread, and where its outcome goes."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]
    context: contextvars.Context
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Any]
    name: str
    task_ids: tuple[str, ...]
    started_at_ms: int = 0
    thread_name: str = ""
    finished: bool = False
    abandoned_at_ms: int | None = None


class HandlerThreads:
    """Runs ``def`` handlers on daemon threads; gives up on them without waiting.

    Args:
        keep: how many idle threads to keep for the next calls (read each time a
            thread comes free, so it follows the worker's concurrency).
    """

    def __init__(self, keep: Callable[[], int]) -> None:
        self._keep = keep
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._idle = 0
        self._abandoned: list[_Job] = []
        self._abandoned_total = 0

    async def run(
        self, fn: Callable[..., Any], args: tuple[Any, ...], *, name: str, task_ids: tuple[str, ...]
    ) -> Any:
        """``fn(*args)`` on a thread; cancelling the wait abandons the thread.

        Returns:
            What ``fn`` returned (it raised: that is raised here).
        """
        loop = asyncio.get_running_loop()
        job = _Job(fn, args, contextvars.copy_context(), loop, loop.create_future(), name, task_ids)
        self._hand_over(job)
        try:
            return await job.future
        except asyncio.CancelledError:
            self._abandon(job)
            raise

    def abandoned(self) -> tuple[AbandonedThread, ...]:
        """The threads still running a call the worker gave up on, oldest first."""
        with self._lock:
            jobs = list(self._abandoned)
        return tuple(
            AbandonedThread(
                thread_name=job.thread_name or "(starting)",
                name=job.name,
                task_ids=job.task_ids,
                started_at_ms=job.started_at_ms,
                abandoned_at_ms=job.abandoned_at_ms or job.started_at_ms,
            )
            for job in jobs
        )

    @property
    def abandoned_total(self) -> int:
        """Calls given up on while their function still ran, since the worker was made."""
        return self._abandoned_total

    def release_idle(self) -> None:
        """End the idle threads (the worker stopped); later calls start new ones."""
        with self._lock:
            idle, self._idle = self._idle, 0
        for _ in range(idle):
            self._jobs.put(None)

    # -- inside ---------------------------------------------------------------------

    def _hand_over(self, job: _Job) -> None:
        job.started_at_ms = now_ms()
        with self._lock:
            if self._idle:
                self._idle -= 1
                self._jobs.put(job)
                return
        name = f"cairnq-handler-{next(_thread_numbers)}"
        threading.Thread(target=self._serve, args=(job,), name=name, daemon=True).start()

    def _abandon(self, job: _Job) -> None:
        with self._lock:
            if job.finished or job.abandoned_at_ms is not None:
                return
            job.abandoned_at_ms = now_ms()
            self._abandoned.append(job)
            self._abandoned_total += 1

    def _serve(self, job: _Job | None) -> None:
        """A thread's life: run the job it was started for, then whatever comes while idle."""
        while job is not None:
            self._call(job)
            with self._lock:
                if self._idle >= self._keep():
                    return
                self._idle += 1
            job = self._jobs.get()

    def _call(self, job: _Job) -> None:
        with self._lock:
            if job.abandoned_at_ms is not None:
                # Given up on before a thread took it: it never runs.
                job.finished = True
                self._abandoned.remove(job)
                return
            job.thread_name = threading.current_thread().name
        outcome: Any = None
        error: BaseException | None = None
        try:
            outcome = job.context.run(job.fn, *job.args)
        except BaseException as exc:
            error = exc
        with self._lock:
            job.finished = True
            if job.abandoned_at_ms is not None:
                self._abandoned.remove(job)
                return  # nobody waits for it any more
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            job.loop.call_soon_threadsafe(_deliver, job.future, outcome, error)


def _deliver(future: asyncio.Future[Any], outcome: Any, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(outcome)
