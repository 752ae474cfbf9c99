"""Waiting for a task to finish (PROTOCOL.md §6.1), and the registry of waits in progress.

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
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal

from engine._errors import TaskTimeout
from engine._models import Task, TaskRef
from engine._rules import at_least

if TYPE_CHECKING:
    from engine.store._base import TaskStore

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
    probe: Callable[[str], Awaitable[TaskRef | None]] = (
        store.get_status if key is None else store.get_status_by_key
    )
    read: Callable[[str], Awaitable[Task | None]] = store.get if key is None else store.get_by_key
    entry = _WaitEntry(kind, subject, key, timeout_ms)
    with _registry_lock:
        _registry[entry.wait_id] = entry
    deadline = time.monotonic() + timeout_ms / 1000
    interval = poll_ms
    wake: asyncio.Task[bool] | None = None
    try:
        while True:
            remaining = int((deadline - time.monotonic()) * 1000)
            # Listen for the completion before probing: a task finishing between
            # the probe and the sleep would otherwise cost a whole interval.
            if entry.task_id is not None and remaining > 0:
                wake = asyncio.ensure_future(
                    store.task_done_wake(entry.task_id, min(interval, remaining))
                )
            ref: TaskRef | None
            if known is not None:
                ref, known = TaskRef(known.id, known.status), None
            else:
                ref = await probe(subject)
            entry.observe(ref)
            remaining = int((deadline - time.monotonic()) * 1000)
            task = None
            if ref is not None and (ref.is_terminal or remaining <= 0):
                task = await read(subject)
                if task is not None and task.is_terminal:
                    return task
            if remaining <= 0:
                raise TaskTimeout(
                    ref.id if ref is not None else subject,
                    timeout_ms=timeout_ms,
                    task=task,
                    key=key,
                    message=timeout_message(subject, key, timeout_ms, task),
                )
            nap = min(interval, remaining)
            if wake is not None and ref is not None and ref.id == entry.task_id:
                await wake
            else:
                if wake is not None:
                    wake.cancel()
                if ref is None:
                    await asyncio.sleep(nap / 1000)
                else:
                    await store.task_done_wake(ref.id, nap)
            wake = None
            interval = next_poll_ms(interval, max_poll_ms)
    finally:
        if wake is not None:
            wake.cancel()
        with _registry_lock:
            _registry.pop(entry.wait_id, None)
