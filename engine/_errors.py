"""The error classes callers see, named as the cairnq SDKs name them.

Conformance compares class names, so every name here is part of the contract.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine._models import Task


class CairnQError(Exception):
    """Base class of every error the engine raises on purpose."""


class AlreadyExists(CairnQError):
    """A keyed submit with ``conflict="reject"`` found a task under the key."""

    def __init__(self, key: str, task_id: str | None = None, status: str | None = None) -> None:
        super().__init__(f"a task already exists for key {key!r}")
        self.key = key
        #: The task holding the key, and its status when the submit looked.
        self.task_id = task_id
        self.status = status


class LostLease(CairnQError):
    """An owned write found the task no longer held by this worker."""

    def __init__(self, task_id: str) -> None:
        super().__init__(f"lease lost for task {task_id}")
        self.task_id = task_id


class QueueFull(CairnQError):
    """The backpressure gate waited ``max_queue_wait_ms`` without headroom."""

    def __init__(self, queue: str, max_depth: int, waited_ms: int) -> None:
        super().__init__(f"queue {queue!r} is full (max depth {max_depth}); waited {waited_ms} ms")
        self.queue = queue
        self.max_depth = max_depth
        self.waited_ms = waited_ms


class TaskTimeout(CairnQError):
    """A wait reached its deadline; the task itself is not stopped."""

    def __init__(
        self,
        task_id: str,
        *,
        timeout_ms: int,
        task: Task | None = None,
        key: str | None = None,
        message: str | None = None,
    ) -> None:
        super().__init__(message or f"task {task_id} did not finish within {timeout_ms} ms")
        self.task_id = task_id
        self.timeout_ms = timeout_ms
        self.task = task
        self.key = key


class TaskFailed(CairnQError):
    """``call`` found the task failed; carries its error envelope."""

    def __init__(self, error: object) -> None:
        # Anything but a dict (None, or an envelope that cannot be decoded)
        # reads as an empty envelope.
        envelope = error if isinstance(error, dict) else {}
        self.error: dict[str, Any] = envelope
        self.type = str(envelope.get("type") or "TaskError")
        self.code = str(envelope.get("code") or "task_error")
        self.message = str(envelope.get("message") or "task failed")
        self.retryable = bool(envelope.get("retryable", False))
        details = envelope.get("details")
        self.details: dict[str, Any] = details if isinstance(details, dict) else {}
        super().__init__(f"{self.type}: {self.message}")


class TaskCanceled(CairnQError):
    """``call`` found the task canceled."""

    def __init__(self, task_id: str) -> None:
        super().__init__(f"task {task_id} was canceled")
        self.task_id = task_id


class TaskError(CairnQError):
    """Raised by a handler to fail its task with a chosen envelope.

    Unlike an ordinary exception it is permanent unless ``retryable=True``.
    """

    def __init__(
        self,
        message: str,
        *,
        code: str = "task_error",
        retryable: bool = False,
        type: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        # A flag, as the store's rules require: TaskError(..., retryable=1) must
        # still be recorded, not refused when its failure is written.
        self.retryable = bool(retryable)
        self.type = type or "TaskError"
        self.details = dict(details or {})

    def envelope(self) -> dict[str, Any]:
        """The error envelope this exception stands for."""
        return {
            "type": self.type,
            "code": self.code,
            "message": self.message,
            "retryable": self.retryable,
            "details": self.details,
        }


class SerializationError(CairnQError, ValueError):
    """A value has no faithful JSON form (NaN, Infinity, bytes, datetime, ...)."""


class ProtocolVersionMismatch(CairnQError):
    """The database speaks a cairnq protocol other than v1."""


class SchemaMismatch(CairnQError):
    """The database is not the cairnq installation it should be.

    Either the Postgres schema in use is not the one holding the cairnq tables
    (§4.20), or the cairnq tables, indexes or triggers differ from the
    protocol's (engine.store._schema_check); raised at open, before any write.
    """


class UnsupportedBackend(CairnQError):
    """The operation needs a backend this store is not (e.g. succeed_in on SQLite)."""


class StoreClosed(CairnQError):
    """The store was closed; the write was not accepted."""


class StoreUnavailable(CairnQError):
    """The database could not be reached or opened (ours, beyond the SDK surface)."""


class StoreLocked(StoreUnavailable):
    """Another connection held the database's lock longer than this store waits.

    SQLite: a write (or an open) met another connection's lock for longer than
    ``busy_timeout_ms``. Postgres: a lock wait ran past the session's
    ``lock_timeout``. Nothing of the operation was done; it may be retried.
    ``__cause__`` is the driver's error, when there was one.
    """


class StorageError(CairnQError):
    """The database could not carry out the operation: an I/O error, a damaged file.

    Ours, beyond the SDK surface. ``__cause__`` is the driver's error.
    """


class StorageFull(StorageError):
    """The disk (or the database's size limit) is full; the operation was not done."""


class NotQueued(CairnQError, ValueError):
    """An operator's reschedule (run now, delay by) found the task not queued (ours).

    ``status`` is the task's status, or None when no task has that id.
    """

    def __init__(self, task_id: str, status: str | None) -> None:
        if status is None:
            why = f"no task {task_id}"
        else:
            why = f"task {task_id} is {status}; only a queued task can be rescheduled"
        super().__init__(why)
        self.task_id = task_id
        self.status = status
