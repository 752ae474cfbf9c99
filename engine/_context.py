"""What a handler holds: ``TaskContext``, one per claimed task (docs/protocol-notes.md, Worker).

The context is the handler's only way to write to its task. Owned writes pass a
local lease check first: once the lease is known lost (or, for progress and
heartbeat, once the task is settled) they raise ``LostLease`` without touching
the database. The check matters because an abandoned attempt's task may be claimed again by the
very same worker id, and the database would then accept a stale handler's write.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from engine import _envelopes as envelopes
from engine._backoff import retry_delay_ms
from engine._errors import LostLease
from engine._models import Task, TaskDef
from engine._waits import DEFAULT_MAX_POLL_MS, DEFAULT_POLL_MS, DEFAULT_TIMEOUT_MS, wait_for_task

if TYPE_CHECKING:
    from engine.store._base import TaskStore


class TaskContext:
    """One claimed task as its handler sees it.

    Attributes mirror the claimed row (``task_id``, ``name``, ``queue``,
    ``attempt``, ``metadata``, ``payload``, ``root_id``, ``correlation_id``);
    ``settled``, ``lost_lease`` and the ``lease_lost`` event report the
    context's state. A handler that loses its lease is not interrupted: it should
    watch ``lost_lease`` / ``lease_lost`` and stop its side effects.
    """

    def __init__(
        self,
        task: Task,
        *,
        store: TaskStore,
        worker_id: str,
        lease_ms: int,
        retry_backoff_ms: int = 1_000,
        retry_backoff_max_ms: int = 30_000,
        lease_deadline: float | None = None,
    ) -> None:
        self._task = task
        self._store = store
        self._worker_id = worker_id
        self._lease_ms = lease_ms
        self._backoff = (retry_backoff_ms, retry_backoff_max_ms)
        self._settled = False
        self._lost = False
        # Made on first use: most handlers never look at it, and a worker
        # draining a batch makes one context per task.
        self._lease_lost: asyncio.Event | None = None
        self._cancel_seen = task.cancel_requested
        # When the lease runs out unless renewed (time.monotonic(), measured from
        # before the claim or renewal was sent, so never later than the row's).
        self._lease_deadline = lease_deadline
        #: The last values the handler reported, for worker snapshots.
        self.reported_progress: float | None = None
        self.reported_message: str | None = None

    # -- the claimed row ----------------------------------------------------------

    @property
    def task(self) -> Task:
        """The row as claimed (status running, this attempt's lease)."""
        return self._task

    @property
    def task_id(self) -> str:
        return self._task.id

    @property
    def name(self) -> str:
        return self._task.name

    @property
    def queue(self) -> str:
        return self._task.queue

    @property
    def attempt(self) -> int:
        return self._task.attempt

    @property
    def worker_id(self) -> str:
        return self._worker_id

    @property
    def metadata(self) -> dict[str, Any]:
        metadata = self._task.metadata
        # A claim never hands over a task whose metadata cannot be decoded.
        return metadata if isinstance(metadata, dict) else {}

    @property
    def payload(self) -> Any:
        return self._task.payload

    @property
    def root_id(self) -> str | None:
        return self._task.root_id

    @property
    def correlation_id(self) -> str | None:
        return self._task.correlation_id

    @property
    def settled(self) -> bool:
        """True once the task was completed or failed through this context or the worker."""
        return self._settled

    @property
    def lost_lease(self) -> bool:
        """True once this worker is known to no longer hold the task."""
        return self._lost

    @property
    def lease_lost(self) -> asyncio.Event:
        """Set when the lease is found lost; await it to stop side effects promptly."""
        event = self._lease_lost
        if event is None:
            event = self._lease_lost = asyncio.Event()
            if self._lost:
                event.set()
        return event

    @property
    def cancel_seen(self) -> bool:
        """Whether a cancel request was observed (heartbeat reply or ``canceled()``)."""
        return self._cancel_seen

    # -- state changes the worker drives --------------------------------------------

    def mark_lost(self) -> None:
        """Flag the lease lost: from now on owned writes fail locally."""
        if not self._lost:
            self._lost = True
            if self._lease_lost is not None:
                self._lease_lost.set()

    def mark_settled(self) -> bool:
        """Claim the right to settle; False if the task was already settled."""
        if self._settled:
            return False
        self._settled = True
        return True

    def extend_lease(self, deadline: float) -> None:
        """Record a renewal that was sent at ``deadline - lease`` and succeeded."""
        if self._lease_deadline is None or deadline > self._lease_deadline:
            self._lease_deadline = deadline

    @property
    def lease_expired(self) -> bool:
        """True once the lease ran out without a renewal this worker saw succeed.

        Failing heartbeats (a database away for a while) end here: the task may
        have been recovered and claimed again, possibly by this very worker id,
        so nothing this attempt writes may reach it any more.
        """
        deadline = self._lease_deadline
        return deadline is not None and time.monotonic() >= deadline

    def observe_cancel(self, requested: bool) -> None:
        """Remember a cancel request (monotonic: never forgotten)."""
        if requested:
            self._cancel_seen = True

    # -- owned writes -----------------------------------------------------------------

    def _check_lease(self, *, settled_refuses: bool) -> None:
        if not self._lost and self.lease_expired:
            self.mark_lost()
        if self._lost or (settled_refuses and self._settled):
            raise LostLease(self.task_id)

    async def _owned(self, write: Awaitable[Task]) -> Task:
        try:
            task = await write
        except LostLease:
            self.mark_lost()
            raise
        self.observe_cancel(task.cancel_requested)
        return task

    async def progress(self, value: float | None, message: str | None = None) -> Task:
        """Report progress (None keeps the previous value) and/or a message.

        Raises:
            LostLease: the lease is lost or the task already settled.
            ValueError: ``value`` is not a number.
        """
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise ValueError(f"progress must be a number or None, got {value!r}")
        if message is not None and not isinstance(message, str):
            raise ValueError(f"message must be a string or None, got {message!r}")
        self._check_lease(settled_refuses=True)
        if message is not None:
            message = envelopes.legible(message)  # a lone surrogate, escaped visibly
        task = await self._owned(
            self._store.progress(
                task_id=self.task_id,
                worker_id=self._worker_id,
                progress=None if value is None else float(value),
                message=message,
            )
        )
        if value is not None:
            self.reported_progress = float(value)
        if message is not None:
            self.reported_message = message
        return task

    async def heartbeat(self) -> Task:
        """Renew the lease now (the worker also does so on its own).

        Raises:
            LostLease: the lease is lost or the task already settled.
        """
        self._check_lease(settled_refuses=True)
        sent = time.monotonic()
        task = await self._owned(
            self._store.heartbeat(
                task_id=self.task_id, worker_id=self._worker_id, lease_ms=self._lease_ms
            )
        )
        self.extend_lease(sent + self._lease_ms / 1000)
        return task

    async def canceled(self) -> bool:
        """True if a cancel was requested (re-reads the row unless one was already seen)."""
        if self._cancel_seen:
            return True
        task = await self._store.get(self.task_id)
        if task is None or task.status == "canceled":
            return True
        self.observe_cancel(task.cancel_requested)
        return self._cancel_seen

    async def _settle(self, write: Callable[[], Awaitable[Task]]) -> Task | None:
        if self._settled:
            return None
        self._check_lease(settled_refuses=False)
        # Settled before the write so a heartbeat racing it does not read the
        # task's absence as a lost lease.
        self._settled = True
        try:
            return await self._owned(write())
        except LostLease:
            raise
        except BaseException:
            # Nothing settled (refused value, unsupported backend, failed write):
            # the handler, or the worker's own settlement, may still settle it.
            self._settled = False
            raise

    async def succeed(self, result: Any = None) -> Task | None:
        """Settle now as succeeded (canceled if a cancel was requested).

        Returns:
            The settled row, or None if the task was already settled.

        Raises:
            LostLease: the lease is lost.
            SerializationError: ``result`` has no JSON form (nothing written).
        """
        return await self._settle(
            lambda: self._store.complete(
                task_id=self.task_id, worker_id=self._worker_id, result=result
            )
        )

    async def fail(self, error: object = "task failed", *, retryable: bool = True) -> Task | None:
        """Settle now as failed: requeued with backoff if retryable and attempts remain.

        ``error`` may be text, an exception, a ``TaskError`` (its retryability
        wins) or an error envelope.

        Returns:
            The settled row, or None if the task was already settled.

        Raises:
            LostLease: the lease is lost.
        """
        envelope, retry = envelopes.for_fail(error, retryable)
        base, cap = self._backoff
        delay = retry_delay_ms(self.attempt, base_ms=base, cap_ms=cap, retryable=retry)
        return await self._settle(
            lambda: self._store.fail(
                task_id=self.task_id,
                worker_id=self._worker_id,
                error=envelope,
                retryable=retry,
                delay_ms=delay,
            )
        )

    async def succeed_in(self, write: Callable[[Any], Awaitable[Any]]) -> Task | None:
        """Run ``write(session)`` and record success in the same Postgres transaction.

        What ``write`` returns becomes the task's result; if the lease turns out
        lost, ``write``'s work rolls back with the settlement.

        Returns:
            The settled row, or None if the task was already settled.

        Raises:
            UnsupportedBackend: the store has no transactional completion (SQLite).
            LostLease: the lease is lost (the transaction is rolled back).
        """
        return await self._settle(
            lambda: self._store.complete_in(
                task_id=self.task_id, worker_id=self._worker_id, write=write
            )
        )

    # -- children and waits ---------------------------------------------------------

    async def submit(
        self, name: str | TaskDef[Any, Any], payload: Any = None, **kwargs: Any
    ) -> Task:
        """Submit a child task: ``parent_id`` is this task, ``root_id`` and
        ``correlation_id`` are inherited. Passes the store's backpressure gate.

        Raises:
            LostLease: the lease is lost (allowed after settling).
        """
        if self._lost:
            raise LostLease(self.task_id)
        for lineage in ("parent_id", "root_id"):
            if lineage in kwargs:
                raise ValueError(f"ctx.submit sets {lineage} itself")
        kwargs.setdefault("correlation_id", self._task.correlation_id)
        return await self._store.submit(
            name=name.name if isinstance(name, TaskDef) else name,
            payload=payload,
            parent_id=self.task_id,
            root_id=self._task.root_id or self.task_id,
            **kwargs,
        )

    async def wait(
        self,
        task_id: str,
        *,
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
        poll_ms: int = DEFAULT_POLL_MS,
    ) -> Task:
        """Wait for another task (e.g. a child) to finish; see ``CairnQ.wait``.

        Raises:
            TaskTimeout: the deadline passed first.
        """
        return await wait_for_task(
            self._store,
            kind="ctx.wait",
            task_id=task_id,
            timeout_ms=timeout_ms,
            poll_ms=poll_ms,
            max_poll_ms=DEFAULT_MAX_POLL_MS,
        )

    def __repr__(self) -> str:
        return f"TaskContext({self.task_id}, name={self.name!r}, attempt={self.attempt})"
