"""cairnq's protocol v1, embedded: stores for SQLite and Postgres, a worker, a client.

The top level holds the cairnq Python SDK's names, so ``from cairnq import ...``
can become ``from engine import ...``, plus the engine's own errors and
``__version__``. What goes beyond the SDK lives in modules of its own:
``engine.inspection`` (the read-only ``Inspector`` and its types) and
``engine.snapshots`` (frozen views of workers and waits in this process).
"""

from importlib.metadata import PackageNotFoundError, version

from engine._client import CairnQ
from engine._context import TaskContext
from engine._errors import (
    AlreadyExists,
    CairnQError,
    LostLease,
    NotQueued,
    ProtocolVersionMismatch,
    QueueFull,
    SchemaMismatch,
    SerializationError,
    StorageError,
    StorageFull,
    StoreClosed,
    StoreLocked,
    StoreUnavailable,
    TaskCanceled,
    TaskError,
    TaskFailed,
    TaskTimeout,
    UnsupportedBackend,
)
from engine._models import (
    CONFLICTS,
    STATUSES,
    Conflict,
    SubmitAction,
    SubmitOutcome,
    Task,
    TaskDef,
    TaskRef,
    TaskStatus,
    is_terminal_status,
)
from engine._retention import Retention, RetentionRule
from engine._waits import active_waits
from engine._worker import Worker
from engine.store import PostgresStore, SQLiteStore, TaskStore, WatchSignal

try:
    __version__ = version("cairnq-tui")
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0.0.0+unknown"

__all__ = [
    "CONFLICTS",
    "STATUSES",
    "AlreadyExists",
    "CairnQ",
    "CairnQError",
    "Conflict",
    "LostLease",
    "NotQueued",
    "PostgresStore",
    "ProtocolVersionMismatch",
    "QueueFull",
    "Retention",
    "RetentionRule",
    "SQLiteStore",
    "SchemaMismatch",
    "SerializationError",
    "StorageError",
    "StorageFull",
    "StoreClosed",
    "StoreLocked",
    "StoreUnavailable",
    "SubmitAction",
    "SubmitOutcome",
    "Task",
    "TaskCanceled",
    "TaskContext",
    "TaskDef",
    "TaskError",
    "TaskFailed",
    "TaskRef",
    "TaskStatus",
    "TaskStore",
    "TaskTimeout",
    "UnsupportedBackend",
    "WatchSignal",
    "Worker",
    "__version__",
    "active_waits",
    "is_terminal_status",
]
