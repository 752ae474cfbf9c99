"""What ``Worker.snapshot()`` returns: the worker's state at one instant, for the console.

Plain frozen records, built from the worker's own bookkeeping without any
database round trip, so a console can take one on every refresh.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from typing import Literal

from engine._clock import now_ms

WorkerState = Literal["running", "paused", "draining", "stopped"]
#: Why a name got fewer tasks than it was offered on the last poll.
Shortfall = Literal["worker full", "own cap", "resource saturated", "claim batch", "nothing due"]


@dataclass(frozen=True, slots=True)
class ErrorReport:
    """One error the worker survived (``on_error``) or one handler failure."""

    at_ms: int
    phase: str
    task_id: str | None
    exception_type: str
    message: str
    traceback: str
    #: The attempt of ``task_id`` that failed (handler failures; None otherwise).
    attempt: int | None = None


@dataclass(frozen=True, slots=True)
class NameSnapshot:
    """A registered name: its limits, what it runs, and how the last poll treated it.

    ``offered`` is the quota in tasks the last poll offered (None before any
    poll reached it), ``claimed`` what it got, ``shortfall`` why it got less or
    was held back: "worker full", "own cap", "resource saturated", "claim batch"
    or "nothing due" (None when nothing limited it).
    """

    name: str
    batch: int | None
    concurrency: int | None
    resource: str | None
    calls_in_flight: int
    tasks_in_flight: int
    offered: int | None
    claimed: int
    shortfall: Shortfall | None


@dataclass(frozen=True, slots=True)
class ResourceHolder:
    """A call holding one unit of a resource."""

    call_id: int
    name: str
    task_ids: tuple[str, ...]
    started_at_ms: int


@dataclass(frozen=True, slots=True)
class ResourceSnapshot:
    """A declared resource: capacity, units held, and by which calls."""

    name: str
    capacity: int
    held: int
    holders: tuple[ResourceHolder, ...]


@dataclass(frozen=True, slots=True)
class CallTaskSnapshot:
    """One task inside an in-flight call."""

    task_id: str
    attempt: int
    settled: bool
    lost: bool
    cancel_requested: bool
    progress: float | None
    message: str | None


@dataclass(frozen=True, slots=True)
class CallSnapshot:
    """One handler call in flight (a batch call carries several tasks)."""

    call_id: int
    name: str
    task_ids: tuple[str, ...]
    started_at_ms: int
    lease_until_ms: int | None
    last_heartbeat_ms: int | None
    lost: bool
    settled: bool
    cancel_requested: bool
    bytes: int
    tasks: tuple[CallTaskSnapshot, ...]


@dataclass(frozen=True, slots=True)
class AbandonedThread:
    """A plain-function handler's thread still running a call the worker gave up on.

    Past ``max_run_ms`` (or when a host cancels the worker) the call's tasks are
    settled or left to their leases and its slot is free again, but a ``def``
    function cannot be interrupted: its thread runs on until it returns, and is
    listed here until then.
    """

    thread_name: str
    name: str
    task_ids: tuple[str, ...]
    started_at_ms: int
    abandoned_at_ms: int


@dataclass(frozen=True, slots=True)
class WorkerSnapshot:
    """The worker's state at one instant, read without any database round trip.

    ``abandoned_threads`` are the ``def`` handlers still running calls given up
    on; ``abandoned_total`` counts every call given up on while its function ran.
    """

    worker_id: str
    queues: tuple[str, ...]
    state: WorkerState
    concurrency_used: int
    concurrency_limit: int
    bytes_in_flight: int
    max_in_flight_bytes: int | None
    lease_ms: int
    polls: int
    last_poll_at_ms: int | None
    tasks_claimed: int
    names: tuple[NameSnapshot, ...]
    resources: tuple[ResourceSnapshot, ...]
    calls: tuple[CallSnapshot, ...]
    recent_errors: tuple[ErrorReport, ...]
    recent_failures: tuple[ErrorReport, ...]
    abandoned_threads: tuple[AbandonedThread, ...]
    abandoned_total: int


def report_of(
    exc: BaseException, phase: str, task_id: str | None, attempt: int | None = None
) -> ErrorReport:
    """An ``ErrorReport`` for ``exc``, stamped now, with its formatted traceback."""
    return ErrorReport(
        at_ms=now_ms(),
        phase=phase,
        task_id=task_id,
        exception_type=type(exc).__name__,
        message=str(exc),
        traceback="".join(traceback.format_exception(exc)),
        attempt=attempt,
    )
