"""Read-only introspection for consoles and dashboards (beyond the cairnq SDK).

``Inspector`` reads pages of tasks (filtered, searched by id, key, payload or
error text, sorted by created, due, updated or completed time), queues with
their counts and latency, running leases, the key table, failure groups,
throughput and latency history and the workers holding leases, every read
bounded by an index walk, a window or a count cap. The types it answers with
live here too, and ``describe_sqlite_file`` tells what a SQLite file is before
anything opens it as a store. The operator writes (run now, delay by) are
``TaskStore.run_now`` / ``TaskStore.delay``.
"""

from engine._inspect_types import (
    DEFAULT_COUNT_CAP,
    DEFAULT_ERROR_WINDOW,
    DEFAULT_NAMES_PER_QUEUE,
    DEFAULT_SEARCH_WINDOW,
    SEARCH_KINDS,
    SORT_KEYS,
    CappedCount,
    ChildRef,
    KeyEntry,
    KeyPage,
    LeaseInfo,
    PageOrder,
    QueueLatency,
    SearchKind,
    SortKey,
    TaskDetail,
    TaskFilter,
    TaskPage,
    TaskSummary,
    ThroughputBucket,
)
from engine._inspector import Inspector
from engine._metrics import DEFAULT_METRICS_CAP, Latency, Metrics, MetricSeries
from engine._models import UndecodableJSON
from engine._sqlite_file import SQLiteFileKind, describe_sqlite_file
from engine._triage import mask_message
from engine._triage_types import (
    WINDOWS,
    FailureGroup,
    FailureGroups,
    FailureSelection,
    WorkerLeases,
    parse_duration,
)

__all__ = [
    "DEFAULT_COUNT_CAP",
    "DEFAULT_ERROR_WINDOW",
    "DEFAULT_METRICS_CAP",
    "DEFAULT_NAMES_PER_QUEUE",
    "DEFAULT_SEARCH_WINDOW",
    "SEARCH_KINDS",
    "SORT_KEYS",
    "WINDOWS",
    "CappedCount",
    "ChildRef",
    "FailureGroup",
    "FailureGroups",
    "FailureSelection",
    "Inspector",
    "KeyEntry",
    "KeyPage",
    "Latency",
    "LeaseInfo",
    "MetricSeries",
    "Metrics",
    "PageOrder",
    "QueueLatency",
    "SQLiteFileKind",
    "SearchKind",
    "SortKey",
    "TaskDetail",
    "TaskFilter",
    "TaskPage",
    "TaskSummary",
    "ThroughputBucket",
    "UndecodableJSON",
    "WorkerLeases",
    "describe_sqlite_file",
    "mask_message",
    "parse_duration",
]
