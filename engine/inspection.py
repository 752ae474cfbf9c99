"""Read-only introspection for consoles and dashboards (beyond the cairnq SDK).

``Inspector`` reads pages of tasks, queues with their counts and latency, running
leases and the key table from any store, every read bounded by an index walk or
a count cap. The types it answers with live here too, and ``describe_sqlite_file``
tells what a SQLite file is before anything opens it as a store.
"""

from engine._inspect_types import (
    DEFAULT_COUNT_CAP,
    SEARCH_KINDS,
    CappedCount,
    ChildRef,
    KeyEntry,
    KeyPage,
    LeaseInfo,
    QueueLatency,
    SearchKind,
    TaskDetail,
    TaskFilter,
    TaskPage,
    TaskSummary,
    ThroughputBucket,
)
from engine._inspector import Inspector
from engine._json import UndecodableJSON
from engine._sqlite_file import SQLiteFileKind, describe_sqlite_file

__all__ = [
    "DEFAULT_COUNT_CAP",
    "SEARCH_KINDS",
    "CappedCount",
    "ChildRef",
    "Inspector",
    "KeyEntry",
    "KeyPage",
    "LeaseInfo",
    "QueueLatency",
    "SQLiteFileKind",
    "SearchKind",
    "TaskDetail",
    "TaskFilter",
    "TaskPage",
    "TaskSummary",
    "ThroughputBucket",
    "UndecodableJSON",
    "describe_sqlite_file",
]
