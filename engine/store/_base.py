"""The store contract shared by both dialects.

``TaskStore`` holds everything that does not depend on the driver: argument
validation (``engine._rules``, before any I/O), id generation and JSON encoding
for submits, the claim variant for a draw, the backpressure gate, in-process
wakeups and row decoding. A dialect implements the ``_``-prefixed primitives,
each of which is one statement or one transaction of the protocol
(docs/protocol-notes.md, "Statements").

The work is split by job along one chain of classes: ``_store_core``
(lifecycle, helpers, wakeups) → ``_submits`` → ``_owned_writes`` →
``_claims`` → ``TaskStore`` here (reads, cancel, retry, purge). Row decoding
lives in ``_rows``.
"""

from __future__ import annotations

import abc
import builtins
from collections.abc import Sequence
from typing import Any

from engine import _rules
from engine._errors import NotQueued
from engine._models import (
    STATUSES,
    Task,
    TaskRef,
)
from engine.store._claims import ClaimArgs as ClaimArgs
from engine.store._claims import ClaimStore
from engine.store._claims import CompletingClaim as CompletingClaim
from engine.store._claims import Draw as Draw
from engine.store._claims import OwnedSettle as OwnedSettle
from engine.store._claims import Plan as Plan
from engine.store._claims import SettleOutcome as SettleOutcome
from engine.store._claims import claim_variant as claim_variant
from engine.store._claims import screen_plan as screen_plan
from engine.store._rows import LEASE_EXPIRED_ERROR as LEASE_EXPIRED_ERROR
from engine.store._rows import LEASE_EXPIRED_JSON as LEASE_EXPIRED_JSON
from engine.store._rows import ROW_COLUMNS as ROW_COLUMNS
from engine.store._rows import encode_error as encode_error
from engine.store._rows import task_from_values as task_from_values
from engine.store._rows import undecodable as undecodable
from engine.store._store_core import READ_STATEMENTS as READ_STATEMENTS
from engine.store._store_core import StoreCapabilities as StoreCapabilities
from engine.store._submits import NewTask as NewTask
from engine.store._submits import insert_params as insert_params
from engine.store._submits import keyed_choice as keyed_choice


class TaskStore(ClaimStore):
    """One cairnq database (SQLite file or Postgres schema) and every protocol operation.

    Public methods validate their arguments before any I/O and raise ``ValueError``
    (or ``SerializationError``) with nothing written. Subclasses implement the
    ``_``-prefixed primitives.
    """

    # -- reads -----------------------------------------------------------------

    async def get(self, task_id: str) -> Task | None:
        """The task, or None."""
        return await self._get(self._text(task_id, "task_id"))

    async def get_by_key(self, key: str) -> Task | None:
        """The task the key points at, or None."""
        return await self._get_by_key(self._text(key, "key"))

    async def get_status(self, task_id: str) -> TaskRef | None:
        """Just ``(id, status)``, or None."""
        return await self._get_status(self._text(task_id, "task_id"))

    async def get_status_by_key(self, key: str) -> TaskRef | None:
        """``(id, status)`` of the task the key points at now, or None."""
        return await self._get_status_by_key(self._text(key, "key"))

    @abc.abstractmethod
    async def _get(self, task_id: str) -> Task | None: ...

    @abc.abstractmethod
    async def _get_by_key(self, key: str) -> Task | None: ...

    @abc.abstractmethod
    async def _get_status(self, task_id: str) -> TaskRef | None: ...

    @abc.abstractmethod
    async def _get_status_by_key(self, key: str) -> TaskRef | None: ...

    async def list(
        self,
        *,
        status: str | None = None,
        queue: str | None = None,
        name: str | None = None,
        root_id: str | None = None,
        correlation_id: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> builtins.list[Task]:
        """Tasks matching every given filter, newest first (§4.5)."""
        _rules.status(status)
        _rules.integer(limit, "limit", minimum=0)
        _rules.integer(offset, "offset", minimum=0)
        filters = {
            "status": status,
            "queue": self._optional_text(queue, "queue"),
            "name": self._optional_text(name, "name"),
            "root_id": self._optional_text(root_id, "root_id"),
            "correlation_id": self._optional_text(correlation_id, "correlation_id"),
        }
        return await self._list(filters, limit, offset)

    @abc.abstractmethod
    async def _list(
        self, filters: dict[str, str | None], limit: int, offset: int
    ) -> builtins.list[Task]: ...

    async def stats(self, queue: str | None = None) -> dict[str, dict[str, int]]:
        """Counts per queue and status, zero-filled (§4.6)."""
        self._optional_text(queue, "queue")
        counted = await self._stats(queue)
        # A named queue is reported even when empty; otherwise only queues with rows.
        names = [queue] if queue is not None else list(dict.fromkeys(row[0] for row in counted))
        table: dict[str, dict[str, int]] = {name: dict.fromkeys(STATUSES, 0) for name in names}
        for name, status, count in counted:
            table[name][status] = int(count)
        return table

    @abc.abstractmethod
    async def _stats(self, queue: str | None) -> builtins.list[tuple[str, str, int]]:
        """``(queue, status, count)`` rows."""

    async def queue_depth(self, queue: str, max_depth: int) -> int:
        """Headroom ``max_depth - min(queued rows, max_depth)`` (§4.7)."""
        self._text(queue, "queue")
        _rules.integer(max_depth, "max_depth", minimum=0)
        return await self._queue_depth(queue, max_depth)

    @abc.abstractmethod
    async def _queue_depth(self, queue: str, max_depth: int) -> int: ...

    # -- cancel / retry / purge -------------------------------------------------

    async def cancel(self, task_id: str) -> Task | None:
        """Cancel a live task (queued: at once; running: cooperative) (§4.8)."""
        task = await self._cancel(self._text(task_id, "task_id"))
        self._after_write(task)
        return task

    async def cancel_by_key(self, key: str) -> Task | None:
        task = await self._cancel_by_key(self._text(key, "key"))
        self._after_write(task)
        return task

    async def retry(self, task_id: str, *, reset_attempt: bool = False) -> Task | None:
        """Requeue a failed or canceled task (§4.9)."""
        task = await self._retry(
            self._text(task_id, "task_id"), _rules.boolean(reset_attempt, "reset_attempt")
        )
        self._after_write(task)
        return task

    async def retry_by_key(self, key: str, *, reset_attempt: bool = False) -> Task | None:
        task = await self._retry_by_key(
            self._text(key, "key"), _rules.boolean(reset_attempt, "reset_attempt")
        )
        self._after_write(task)
        return task

    @abc.abstractmethod
    async def _cancel(self, task_id: str) -> Task | None: ...

    @abc.abstractmethod
    async def _cancel_by_key(self, key: str) -> Task | None: ...

    @abc.abstractmethod
    async def _retry(self, task_id: str, reset_attempt: bool) -> Task | None: ...

    @abc.abstractmethod
    async def _retry_by_key(self, key: str, reset_attempt: bool) -> Task | None: ...

    async def run_now(self, task_id: str) -> Task:
        """Make a queued task due now (an earlier due time is kept); ours, beyond the SDK.

        Raises:
            NotQueued: the task is running or finished, or there is no such task.
        """
        task_id = self._text(task_id, "task_id")
        return await self._rescheduled(task_id, await self._reschedule("run_now", task_id, {}))

    async def delay(self, task_id: str, delay_ms: int) -> Task:
        """Push a queued task back by ``delay_ms`` from its due time (or from now if due).

        Raises:
            ValueError: ``delay_ms`` not a positive integer.
            NotQueued: the task is running or finished, or there is no such task.
        """
        task_id = self._text(task_id, "task_id")
        _rules.integer(delay_ms, "delay_ms", minimum=1)
        task = await self._reschedule("delay", task_id, {"delay_ms": delay_ms})
        return await self._rescheduled(task_id, task)

    async def purge_ids(self, task_ids: Sequence[str]) -> builtins.list[str]:
        """Delete the listed tasks that are finished; the ids deleted (ours, beyond the SDK).

        Live tasks and unknown ids are left alone (a group purge, a purge by id).
        At most 10,000 ids per call.

        Raises:
            ValueError: not a list of ids, or more than 10,000.
        """
        if isinstance(task_ids, str) or not isinstance(task_ids, Sequence):
            raise ValueError("task_ids must be a list of task ids")
        if len(task_ids) > 10_000:
            raise ValueError(f"task_ids holds {len(task_ids):,} ids; at most 10,000 per call")
        ids = [self._text(task_id, "task_id") for task_id in task_ids]
        if not ids:
            return []
        return await self._purge_ids(ids)

    @abc.abstractmethod
    async def _purge_ids(self, task_ids: builtins.list[str]) -> builtins.list[str]:
        """Run ``purge_ids`` on the listed ids; the ids deleted."""

    async def _rescheduled(self, task_id: str, task: Task | None) -> Task:
        if task is None:
            ref = await self.get_status(task_id)
            raise NotQueued(task_id, None if ref is None else ref.status)
        self._after_write(task)
        return task

    @abc.abstractmethod
    async def _reschedule(
        self, statement: str, task_id: str, params: dict[str, Any]
    ) -> Task | None:
        """Run ``run_now`` or ``delay`` on a queued task; None if it is not queued."""

    async def purge(
        self,
        *,
        older_than_ms: int = 0,
        queue: str | None = None,
        status: str | None = None,
        name: str | None = None,
        limit: int = 1_000,
    ) -> builtins.list[str]:
        """Delete up to ``limit`` terminal tasks completed before the cutoff (§4.10)."""
        _rules.duration_ms(older_than_ms, "older_than_ms")
        _rules.integer(limit, "limit", minimum=1)
        _rules.status(status, terminal_only=True)
        filters = {
            "queue": self._optional_text(queue, "queue"),
            "status": status,
            "name": self._optional_text(name, "name"),
        }
        return await self._purge(older_than_ms, filters, limit)

    @abc.abstractmethod
    async def _purge(
        self, older_than_ms: int, filters: dict[str, str | None], limit: int
    ) -> builtins.list[str]: ...
