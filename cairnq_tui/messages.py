"""Messages that carry database results from workers to the widgets that draw them.

Workers never touch widgets: they read through the Inspector or the client and
post one of these; only the message handler updates the screen. ``generation``
lets a view drop a result that a newer filter or page has made stale.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from textual.message import Message

from engine import TaskRef
from engine.inspection import (
    CappedCount,
    KeyPage,
    LeaseInfo,
    QueueLatency,
    TaskDetail,
    TaskPage,
    ThroughputBucket,
)
from engine.snapshots import WaitSnapshot


@dataclass
class DataMessage(Message):
    """Base: a refresh result and what its database reads cost."""

    cost_ms: float


@dataclass
class TasksRefreshed(DataMessage):
    generation: int
    page: TaskPage


@dataclass
class QueuesRefreshed(DataMessage):
    queues: list[str]
    counts: dict[str, dict[str, CappedCount]] | None
    latency: dict[str, QueueLatency]
    throughput: list[ThroughputBucket]
    headroom: dict[str, int]
    #: Succeeded and failed per queue over the last 60 s (the rolling per-minute rates).
    recent: dict[str, dict[str, int]] = field(default_factory=dict)


@dataclass
class LeasesRefreshed(DataMessage):
    leases: list[LeaseInfo]
    limit: int


@dataclass
class KeysRefreshed(DataMessage):
    generation: int
    page: KeyPage
    #: After a follow ended: where its key points now (None: nowhere, or no follow).
    followed: TaskRef | None = None


@dataclass
class DetailRefreshed(DataMessage):
    detail: TaskDetail | None
    #: The detail screen's open the read was for (``TaskDetailScreen.opened``).
    opened: int = 0


@dataclass
class FollowUpdated(Message):
    """A followed key moved on (``snapshot``) or its wait ended (``finished``)."""

    key: str
    snapshot: WaitSnapshot | None = None
    finished: str | None = None
    task_id: str | None = None


@dataclass
class StoreConnected(Message):
    """The store is open; ``meta`` holds protocol and schema versions."""

    meta: dict[str, str] = field(default_factory=dict)
    names: list[str] = field(default_factory=list)
    queues: list[str] = field(default_factory=list)


@dataclass
class DatabaseWoke(Message):
    """A watch signal (NOTIFY on Postgres, in-process writes): refresh early."""

    reason: str = "queued"


@dataclass
class ControlFinished(Message):
    """A control (submit, cancel, retry, replace, purge) ended; what to tell the operator."""

    summary: str
    severity: str = "information"
    follow_key: str | None = None
    open_task: str | None = None
