"""cairnq's protocol v1, embedded: stores for SQLite and Postgres, a worker, a client.

Everything public is re-exported here; the names follow the cairnq Python SDK so
``from cairnq import ...`` can become ``from engine import ...``.
"""

from engine._backoff import retry_delay_ms
from engine._client import CairnQ
from engine._context import TaskContext
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
from engine._gate import QueueGate
from engine._inspect import (
    CappedCount,
    ChildRef,
    Inspector,
    KeyEntry,
    KeyPage,
    LeaseInfo,
    QueueLatency,
    SQLiteFileKind,
    TaskDetail,
    TaskFilter,
    TaskPage,
    TaskSummary,
    ThroughputBucket,
    describe_sqlite_file,
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
from engine._retention import Retention, RetentionRule
from engine._waits import WaitSnapshot, active_waits
from engine._worker import Worker
from engine._worker_snapshot import (
    CallSnapshot,
    CallTaskSnapshot,
    ErrorReport,
    NameSnapshot,
    ResourceHolder,
    ResourceSnapshot,
    WorkerSnapshot,
)
from engine.store import PostgresStore, SQLiteStore, TaskStore, WatchSignal

__all__ = [
    "CONFLICTS",
    "STATUSES",
    "AlreadyExists",
    "CairnQ",
    "CairnQError",
    "CallSnapshot",
    "CallTaskSnapshot",
    "CappedCount",
    "ChildRef",
    "Conflict",
    "ErrorReport",
    "Inspector",
    "KeyEntry",
    "KeyPage",
    "LeaseInfo",
    "LostLease",
    "NameSnapshot",
    "PostgresStore",
    "ProtocolVersionMismatch",
    "QueueFull",
    "QueueGate",
    "QueueLatency",
    "ResourceHolder",
    "ResourceSnapshot",
    "Retention",
    "RetentionRule",
    "SQLiteFileKind",
    "SQLiteStore",
    "SchemaMismatch",
    "SerializationError",
    "StoreClosed",
    "StoreUnavailable",
    "Task",
    "TaskCanceled",
    "TaskContext",
    "TaskDef",
    "TaskDetail",
    "TaskError",
    "TaskFailed",
    "TaskFilter",
    "TaskPage",
    "TaskRef",
    "TaskStatus",
    "TaskStore",
    "TaskSummary",
    "TaskTimeout",
    "ThroughputBucket",
    "UnsupportedBackend",
    "WaitSnapshot",
    "WatchSignal",
    "Worker",
    "WorkerSnapshot",
    "active_waits",
    "describe_sqlite_file",
    "is_terminal_status",
    "retry_delay_ms",
]
