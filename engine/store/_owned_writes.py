"""A worker's writes to the tasks it holds: heartbeats, progress, settlement (§4.15-§4.18)."""

from __future__ import annotations

import abc
import builtins
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from engine import _rules
from engine._errors import UnsupportedBackend
from engine._models import (
    Task,
)
from engine.store._rows import encode_error
from engine.store._submits import SubmitStore


class OwnedWriteStore(SubmitStore):
    """Ownership-checked writes: each raises ``LostLease`` when the lease is gone."""

    # -- owned writes ------------------------------------------------------------

    async def heartbeat(self, *, task_id: str, worker_id: str, lease_ms: int = 30_000) -> Task:
        """Renew one lease (§4.15).

        Raises:
            LostLease: the task is no longer running under this worker's lease.
        """
        task_id, worker_id = self._owned_ids(task_id, worker_id)
        _rules.duration_ms(lease_ms, "lease_ms", minimum=1)
        return await self._heartbeat(task_id, worker_id, lease_ms)

    @abc.abstractmethod
    async def _heartbeat(self, task_id: str, worker_id: str, lease_ms: int) -> Task: ...

    async def heartbeat_batch(
        self, *, task_ids: Sequence[str], worker_id: str, lease_ms: int = 30_000
    ) -> dict[str, bool]:
        """Renew each owned lease; ``{id: cancel requested}`` for renewed rows only,
        in the order the ids were given."""
        ids = _rules.text_list(task_ids, "task_ids", refuses_nul=self.text_refuses_nul)
        self._text(worker_id, "worker_id")
        _rules.duration_ms(lease_ms, "lease_ms", minimum=1)
        if not ids:
            return {}
        renewed = await self._heartbeat_batch(ids, worker_id, lease_ms)
        return {task_id: renewed[task_id] for task_id in ids if task_id in renewed}

    @abc.abstractmethod
    async def _heartbeat_batch(
        self, task_ids: builtins.list[str], worker_id: str, lease_ms: int
    ) -> dict[str, bool]: ...

    async def progress(
        self,
        *,
        task_id: str,
        worker_id: str,
        progress: float | None = None,
        message: str | None = None,
    ) -> Task:
        """Coalescing progress/message update: None keeps each (§4.16).

        Raises:
            ValueError: progress is not a finite number, message not storable text.
            LostLease: the task is no longer running under this worker's lease.
        """
        task_id, worker_id = self._owned_ids(task_id, worker_id)
        value = _rules.progress(progress)
        message = self._optional_text(message, "message")
        return await self._progress(task_id, worker_id, value, message)

    @abc.abstractmethod
    async def _progress(
        self, task_id: str, worker_id: str, progress: float | None, message: str | None
    ) -> Task: ...

    async def succeed(self, *, task_id: str, worker_id: str, result: Any = None) -> Task:
        """Raw success, ignoring a cancel request (§4.17)."""
        task_id, worker_id = self._owned_ids(task_id, worker_id)
        task = await self._succeed(task_id, worker_id, self._result_json(result))
        self._after_write(task)
        return task

    async def complete(self, *, task_id: str, worker_id: str, result: Any = None) -> Task:
        """The worker's finaliser: succeeded, or canceled if cancel was requested."""
        task_id, worker_id = self._owned_ids(task_id, worker_id)
        task = await self._complete(task_id, worker_id, self._result_json(result))
        self._after_write(task)
        return task

    async def fail(
        self,
        *,
        task_id: str,
        worker_id: str,
        error: Mapping[str, Any],
        retryable: bool = True,
        delay_ms: int = 0,
    ) -> Task:
        """Record a failure: requeue, fail for good, or cancel (§4.18)."""
        task_id, worker_id = self._owned_ids(task_id, worker_id)
        _rules.boolean(retryable, "retryable")
        _rules.duration_ms(delay_ms, "delay_ms")
        task = await self._fail(
            task_id, worker_id, encode_error(error, retryable), retryable, delay_ms
        )
        self._after_write(task)
        return task

    async def complete_many(self, *, task_ids: Sequence[str], worker_id: str) -> set[str]:
        """``complete`` with no result for several owned tasks, in one statement.

        The worker's settle path for handlers that return nothing: each row
        follows the rule of ``complete`` (cancel wins) and is checked on its own.

        Args:
            task_ids: the tasks to settle.
            worker_id: the worker that should own them.

        Returns:
            The ids settled (succeeded, or canceled when a cancel was
            requested); an id missing lost its lease, as ``LostLease`` would say.

        Raises:
            ValueError: an id or the worker id is not a non-empty string.
        """
        ids = _rules.text_list(task_ids, "task_ids", refuses_nul=self.text_refuses_nul)
        self._text(worker_id, "worker_id")
        if not ids:
            return set()
        settled = await self._complete_many(ids, worker_id)
        for task_id in settled:
            self.signals.done(task_id)  # complete only ever ends a task
        return settled

    @abc.abstractmethod
    async def _complete_many(self, task_ids: builtins.list[str], worker_id: str) -> set[str]: ...

    @abc.abstractmethod
    async def _succeed(self, task_id: str, worker_id: str, result_json: str | None) -> Task: ...

    @abc.abstractmethod
    async def _complete(self, task_id: str, worker_id: str, result_json: str | None) -> Task: ...

    @abc.abstractmethod
    async def _fail(
        self, task_id: str, worker_id: str, error_json: str, retryable: bool, delay_ms: int
    ) -> Task: ...

    async def complete_in(
        self,
        *,
        task_id: str,
        worker_id: str,
        result: Any = None,
        write: Callable[[Any], Awaitable[Any]],
    ) -> Task:
        """``complete`` committed in one transaction with ``await write(session)``.

        On Postgres ``session`` is the psycopg ``AsyncConnection`` inside the open
        transaction. With ``result`` None, what ``write`` returns becomes the result
        (as cairnq's ``succeed_in``).

        Raises:
            UnsupportedBackend: this dialect has no caller-visible transaction
                (only Postgres offers it).
            LostLease: the task is not owned (the caller's write is rolled back).
            SerializationError: ``result`` has no faithful JSON form.
        """
        return await self._owned_in("complete", task_id, worker_id, result, write)

    async def succeed_in(
        self,
        *,
        task_id: str,
        worker_id: str,
        result: Any = None,
        write: Callable[[Any], Awaitable[Any]],
    ) -> Task:
        """Raw ``succeed`` committed in one transaction with ``await write(session)``.

        Raises:
            UnsupportedBackend, LostLease, SerializationError: as for ``complete_in``.
        """
        return await self._owned_in("succeed", task_id, worker_id, result, write)

    async def _owned_in(
        self,
        name: str,
        task_id: str,
        worker_id: str,
        result: Any,
        write: Callable[[Any], Awaitable[Any]],
    ) -> Task:
        """Settle by statement ``name`` in the caller's transaction (a dialect that has one)."""
        raise UnsupportedBackend(f"{name}_in needs Postgres; this store is {self.dialect}")

    @abc.abstractmethod
    async def protocol_version(self) -> int:
        """The database's ``protocol_version`` (0 when the row is missing)."""
