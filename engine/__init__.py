"""cairnq's protocol v1, embedded: stores for SQLite and Postgres, a worker, a client.

Everything public is re-exported here; the names follow the cairnq Python SDK so
``from cairnq import ...`` can become ``from engine import ...``.
"""

from engine._backoff import retry_delay_ms
from engine._errors import (
    AlreadyExists,
    CairnQError,
    LostLease,
    ProtocolVersionMismatch,
    QueueFull,
    SchemaMismatch,
    SerializationError,
    StoreClosed,
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
    Task,
    TaskDef,
    TaskRef,
    TaskStatus,
    is_terminal_status,
)
from engine.store import TaskStore, WatchSignal

__all__ = [
    "CONFLICTS",
    "STATUSES",
    "AlreadyExists",
    "CairnQError",
    "Conflict",
    "LostLease",
    "ProtocolVersionMismatch",
    "QueueFull",
    "SchemaMismatch",
    "SerializationError",
    "StoreClosed",
    "StoreUnavailable",
    "Task",
    "TaskCanceled",
    "TaskDef",
    "TaskError",
    "TaskFailed",
    "TaskRef",
    "TaskStatus",
    "TaskStore",
    "TaskTimeout",
    "UnsupportedBackend",
    "WatchSignal",
    "is_terminal_status",
    "retry_delay_ms",
]
