"""Waiting for a task to finish, and the registry of waits in progress.

The protocol's side of waiting is in docs/protocol-notes.md, "Client".

Every wait in this process (``CairnQ.wait``, ``wait_by_key``, ``call``, and
``TaskContext.wait``) runs through ``wait_for_task``, which records what it is
waiting on in a process-wide registry; ``active_waits()`` reads it without any
database round trip, so a console can show who is blocked on what.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal

from engine._errors import TaskTimeout
from engine._models import Task, TaskRef
from engine._rules import at_least

if TYPE_CHECKING:
    from engine.store._base import TaskStore
    from engine.store._signals import Wake

WaitKind = Literal["wait", "wait_by_key", "call", "ctx.wait"]

DEFAULT_TIMEOUT_MS = 30_000
DEFAULT_POLL_MS = 100
DEFAULT_MAX_POLL_MS = 500


@dataclass(frozen=True, slots=True)
class WaitSnapshot:
    """One wait in progress, as ``active_waits()`` reports it.

    ``task_id`` is what the wait currently resolves to (for a by-key wait, the
    task the key pointed at on the last beat; None until it resolves), and
    ``replace_count`` how many times a ``replace`` moved the key to another task.
    """

    wait_id: int
    kind: WaitKind
    subject: str
    key: str | None
    started_at_ms: int
    deadline_ms: int
    task_id: str | None
    last_status: str | None
    replace_count: int
    beats: int


class _WaitEntry:
    __slots__ = (
        "beats",
        "deadline_ms",
        "key",
        "kind",
        "last_status",
        "replace_count",
        "started_at_ms",
        "subject",
        "task_id",
        "wait_id",
    )

    def __init__(self, kind: WaitKind, subject: str, key: str | None, timeout_ms: int) -> None:
        self.wait_id = next(_ids)
        self.kind = kind
        self.subject = subject
        self.key = key
        self.started_at_ms = int(time.time() * 1000)
        self.deadline_ms = self.started_at_ms + timeout_ms
        self.task_id: str | None = None if key is not None else subject
        self.last_status: str | None = None
        self.replace_count = 0
        self.beats = 0

    def observe(self, ref: TaskRef | None) -> None:
        self.beats += 1
        if ref is None:
            return
        if self.key is not None and self.task_id is not None and ref.id != self.task_id:
            self.replace_count += 1
        self.task_id = ref.id
        self.last_status = ref.status

    def snapshot(self) -> WaitSnapshot:
        return WaitSnapshot(
            wait_id=self.wait_id,
            kind=self.kind,
            subject=self.subject,
            key=self.key,
            started_at_ms=self.started_at_ms,
            deadline_ms=self.deadline_ms,
            task_id=self.task_id,
            last_status=self.last_status,
            replace_count=self.replace_count,
            beats=self.beats,
        )


_ids = itertools.count(1)
_registry: dict[int, _WaitEntry] = {}
_registry_lock = threading.Lock()


def active_waits() -> list[WaitSnapshot]:
    """Every wait in progress in this process, oldest first (no database access)."""
    with _registry_lock:
        entries = list(_registry.values())
    return [e.snapshot() for e in entries]


def next_poll_ms(interval: int, max_poll_ms: int) -> int:
    """100 -> 150 -> 225 -> 337 -> 500 ...: grow by half, at least by one, capped."""
    return min(max_poll_ms, max(interval + 1, interval * 3 // 2))


def _clock(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%H:%M:%S.%f")[:-3] + "Z"


def timeout_message(subject: str, key: str | None, timeout_ms: int, task: Task | None) -> str:
    """Why a wait timed out, from the task as last read (None: never found)."""
    what = f"key {key!r}" if key is not None else f"task {subject}"
    head = f"{what} did not finish within {timeout_ms} ms"
    if task is None:
        if key is not None:
            return f"{head}: the key does not resolve to any task"
        return f"{head}: no such task"
    where = f"name {task.name!r} and queue {task.queue!r}"
    if key is not None:
        head = f"{head} (it resolves to {task.id})"
    if task.status == "queued":
        now = int(time.time() * 1000)
        if task.run_at_ms > now:
            due = f"due at {_clock(task.run_at_ms)} (in {task.run_at_ms - now} ms)"
            if task.attempt:
                return (
                    f"{head}: still queued for a retry after attempt {task.attempt} of "
                    f"{task.max_attempts}, {due}"
                )
            return f"{head}: still queued, delayed until it is {due}"
        if task.attempt == 0:
            return (
                f"{head}: never claimed; it has been due since {_clock(task.run_at_ms)} - "
                f"is a worker running for {where}?"
            )
        return (
            f"{head}: queued again after attempt {task.attempt} of {task.max_attempts} and "
            f"due since {_clock(task.run_at_ms)}, but not claimed - "
            f"is a worker running for {where}?"
        )
    if task.status == "running":
        holder = f"worker {task.worker_id}, attempt {task.attempt} of {task.max_attempts}"
        if task.cancel_requested:
            return (
                f"{head}: cancel pending - requested at {_clock(task.cancel_requested_at_ms or 0)} "
                f"but the handler on {holder} has not stopped yet"
            )
        lease = f", lease until {_clock(task.lease_until_ms)}" if task.lease_until_ms else ""
        return f"{head}: still running on {holder}{lease}"
    return f"{head}: status {task.status}"


async def wait_for_task(
    store: TaskStore,
    *,
    kind: WaitKind,
    task_id: str | None = None,
    key: str | None = None,
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
    poll_ms: int = DEFAULT_POLL_MS,
    max_poll_ms: int = DEFAULT_MAX_POLL_MS,
    known: Task | None = None,
) -> Task:
    """Poll ``task_id`` (or whatever ``key`` resolves to each beat) until terminal.

    Args:
        store: where the task lives.
        kind: how the registry labels this wait.
        task_id / key: exactly one of them.
        timeout_ms: deadline; the task is not stopped when it passes.
        poll_ms / max_poll_ms: the first interval, and its ceiling as it grows.
        known: the row as the caller just wrote it (``call`` after its submit);
            it stands in for the first status probe, which could tell nothing new.

    Returns:
        The terminal task, whichever terminal status it reached.

    Raises:
        ValueError: bad arguments (before any I/O).
        TaskTimeout: the deadline passed first; its message says why.
    """
    if (task_id is None) == (key is None):
        raise ValueError("pass exactly one of task_id and key")
    subject = task_id if task_id is not None else key
    if not isinstance(subject, str) or not subject:
        raise ValueError(f"{'task_id' if key is None else 'key'} must be a non-empty string")
    at_least(timeout_ms, "timeout_ms", 0)
    at_least(poll_ms, "poll_ms", 1)
    at_least(max_poll_ms, "max_poll_ms", 1)
    entry = _WaitEntry(kind, subject, key, timeout_ms)
    with _registry_lock:
        _registry[entry.wait_id] = entry
    follow = _Follow(store, entry, timeout_ms)
    try:
        return await follow.until_terminal(poll_ms, max_poll_ms, known)
    finally:
        follow.disarm()
        with _registry_lock:
            _registry.pop(entry.wait_id, None)


class _Woken:
    """What ended a nap (three singletons)."""

    __slots__ = ("what",)

    def __init__(self, what: str) -> None:
        self.what = what


#: The nap ran its course (nothing woke it).
_SLEPT = _Woken("slept")
#: A signal about the task itself (its "done"): the row can end the wait.
_ABOUT_IT = _Woken("about it")
#: Something committed somewhere (another process, on SQLite), or a release.
_SOMETHING = _Woken("something")


class _Follow:
    """One wait's beats: look at the task, nap until woken or the interval passes.

    The nap is a wake-up armed on the store (``arm_task_done_wake``): a task
    that finishes in this process, or in another one (Postgres notifications,
    SQLite commits seen on the file), ends it early. It is armed
    synchronously *before* the look, so a task finishing between the look and
    the nap still cuts the nap short. The full row (payload and all) is read
    only when it can end the wait: at once after a wake about this task (its
    "done" signal: it most likely finished, and the row carries the status),
    else only once a status look found the task terminal. A wake by a commit
    anywhere in the database (another process's, seen on a SQLite file: every
    heartbeat of a busy file) costs a status look, not a row.
    """

    __slots__ = ("_deadline", "_entry", "_store", "_timeout_ms", "_wake", "_wake_for")

    def __init__(self, store: TaskStore, entry: _WaitEntry, timeout_ms: int) -> None:
        self._store = store
        self._entry = entry
        self._timeout_ms = timeout_ms
        self._deadline = time.monotonic() + timeout_ms / 1000
        self._wake: Wake | None = None
        self._wake_for: str | None = None

    def _left_ms(self) -> int:
        return int((self._deadline - time.monotonic()) * 1000)

    async def _look(self) -> TaskRef | None:
        subject, key = self._entry.subject, self._entry.key
        if key is None:
            return await self._store.get_status(subject)
        return await self._store.get_status_by_key(subject)

    async def _row(self) -> Task | None:
        subject, key = self._entry.subject, self._entry.key
        if key is None:
            return await self._store.get(subject)
        return await self._store.get_by_key(subject)

    def _arm(self) -> None:
        target = self._entry.task_id
        if target is None or (self._wake is not None and self._wake_for == target):
            return
        self.disarm()
        self._wake = self._store.arm_task_done_wake(target)
        self._wake_for = target

    def disarm(self) -> None:
        if self._wake is not None:
            self._wake.close()
        self._wake, self._wake_for = None, None

    async def _nap(self, ref: TaskRef | None, nap_ms: int) -> Task | _Woken:
        """Sleep up to ``nap_ms``; what ended it, or the terminal row a wake carried."""
        if ref is None:
            # Nothing to listen for yet (an unknown id, a key that points nowhere).
            self.disarm()
            await asyncio.sleep(nap_ms / 1000)
            return _SLEPT
        if self._wake_for != ref.id:
            self.disarm()  # a by-key wait moved to another task: listen there
            self._wake = self._store.arm_task_done_wake(ref.id)
            self._wake_for = ref.id
        wake = self._wake
        assert wake is not None
        woken = await wake.woken(nap_ms)
        self.disarm()  # one wake per nap; the next beat arms a fresh one
        done = wake.task
        if woken and done is not None and self._entry.key is None and done.is_terminal:
            # Committed by this process just now: no read needed. (A by-key
            # wait reads: a replace ends the old task and moves the key.)
            return done
        if not woken:
            return _SLEPT
        return _ABOUT_IT if wake.about_it else _SOMETHING

    async def until_terminal(self, poll_ms: int, max_poll_ms: int, known: Task | None) -> Task:
        entry = self._entry
        interval = poll_ms
        ahead: TaskRef | None = TaskRef(known.id, known.status) if known is not None else None
        woken: Task | _Woken = _SLEPT
        while True:
            self._arm()
            last_read: Task | None = None
            ref: TaskRef | None
            if ahead is not None:
                ref, ahead = ahead, None
            elif woken is _ABOUT_IT:
                # Its "done" signal: most likely finished, one read of the row, not two.
                last_read = await self._row()
                ref = None if last_read is None else TaskRef(last_read.id, last_read.status)
            else:
                ref = await self._look()
            entry.observe(ref)
            if last_read is not None and last_read.is_terminal:
                return last_read
            left = self._left_ms()
            if ref is not None and (ref.is_terminal or left <= 0) and last_read is None:
                # The full row only when it can end the wait: a terminal look,
                # or the deadline (so the timeout can say where the task stands).
                last_read = await self._row()
                if last_read is not None and last_read.is_terminal:
                    return last_read
            if left <= 0:
                raise TaskTimeout(
                    entry.subject if ref is None else ref.id,
                    timeout_ms=self._timeout_ms,
                    task=last_read,
                    key=entry.key,
                    message=timeout_message(entry.subject, entry.key, self._timeout_ms, last_read),
                )
            woken = await self._nap(ref, min(interval, left))
            if isinstance(woken, Task):
                entry.observe(TaskRef(woken.id, woken.status))
                return woken
            if woken is _SLEPT:
                interval = next_poll_ms(interval, max_poll_ms)
