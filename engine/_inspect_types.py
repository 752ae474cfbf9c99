"""The values the ``Inspector`` answers with: filters, pages, counts, leases, keys.

Plain frozen dataclasses with no I/O, shared by the inspector's read modules and
re-exported by ``engine.inspection``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from engine._models import Task, TaskRef, TaskStatus
from engine._rules import status as check_status

SearchKind = Literal["id", "key", "payload"]
SEARCH_KINDS: tuple[SearchKind, ...] = ("id", "key", "payload")

#: Default ceiling of a count: beyond it the console shows "10,000+".
DEFAULT_COUNT_CAP = 10_000
#: How many tasks a payload text search reads per page at most.
DEFAULT_PAYLOAD_SCAN = 50_000


@dataclass(frozen=True, slots=True)
class CappedCount:
    """A count that stopped at ``cap``: ``value == cap`` means "at least that many"."""

    value: int
    cap: int

    @property
    def at_least(self) -> bool:
        """True when the real count may be higher than ``value``."""
        return self.value >= self.cap

    def __str__(self) -> str:
        return f"{self.value:,}+" if self.at_least else f"{self.value:,}"


@dataclass(frozen=True, slots=True)
class TaskFilter:
    """What a task page shows: equality filters plus one optional search.

    ``search`` is an id prefix, a key prefix or a payload substring, per
    ``search_kind``; empty or None means no search.
    """

    status: str | None = None
    queue: str | None = None
    name: str | None = None
    search: str | None = None
    search_kind: SearchKind = "id"

    def __post_init__(self) -> None:
        check_status(self.status)
        if self.search_kind not in SEARCH_KINDS:
            raise ValueError(f"unknown search kind {self.search_kind!r}; expected {SEARCH_KINDS}")
        for what in ("queue", "name", "search"):
            value = getattr(self, what)
            if value is not None and not isinstance(value, str):
                raise ValueError(f"{what} must be a string or None")

    @property
    def active_search(self) -> str | None:
        """The search text, or None when there is no search."""
        return self.search if self.search else None


@dataclass(frozen=True, slots=True)
class TaskSummary:
    """The light columns of a task row (no JSON), as a table shows them."""

    id: str
    name: str
    queue: str
    status: TaskStatus
    attempt: int
    max_attempts: int
    priority: int
    worker_id: str | None
    lease_until_ms: int | None
    run_at_ms: int
    cancel_requested_at_ms: int | None
    progress: float | None
    message: str | None
    created_at_ms: int
    updated_at_ms: int
    completed_at_ms: int | None
    key: str | None = None


@dataclass(frozen=True, slots=True)
class TaskPage:
    """One page of tasks and how to move from it.

    ``order`` is ``"id"`` (newest first) or ``"key"`` (a key search, in key order);
    ``first_cursor``/``last_cursor`` are the id (or key) of the first and last row.
    ``total`` is the capped count of every matching task (None for a payload
    search, which counts only within its scan window).
    """

    rows: tuple[TaskSummary, ...]
    order: Literal["id", "key"]
    has_previous: bool
    has_next: bool
    total: CappedCount | None
    scan_limit: int | None = None

    @property
    def first_cursor(self) -> str | None:
        return self._cursor(0)

    @property
    def last_cursor(self) -> str | None:
        return self._cursor(-1)

    def _cursor(self, index: int) -> str | None:
        if not self.rows:
            return None
        row = self.rows[index]
        return row.key if self.order == "key" else row.id


@dataclass(frozen=True, slots=True)
class QueueLatency:
    """Per queue: ``run_at_ms`` of the oldest due queued task and of the next delayed one."""

    queue: str
    oldest_due_ms: int | None
    next_delayed_ms: int | None


@dataclass(frozen=True, slots=True)
class ThroughputBucket:
    """Tasks of ``queue`` that entered ``status`` during one minute (epoch minute)."""

    queue: str
    status: str
    minute: int
    count: int


@dataclass(frozen=True, slots=True)
class LeaseInfo:
    """A running task's lease, for the leases view."""

    id: str
    name: str
    queue: str
    worker_id: str | None
    attempt: int
    max_attempts: int
    lease_until_ms: int
    cancel_requested_at_ms: int | None
    progress: float | None
    message: str | None
    updated_at_ms: int

    @property
    def status(self) -> TaskStatus:
        """Always ``"running"``: only running tasks hold a lease."""
        return "running"


@dataclass(frozen=True, slots=True)
class KeyEntry:
    """A row of ``cairnq_task_keys`` with the status of the task it points at."""

    key: str
    task_id: str
    status: str | None
    name: str | None
    queue: str | None
    created_at_ms: int
    updated_at_ms: int


@dataclass(frozen=True, slots=True)
class KeyPage:
    """One page of the key table, in key order."""

    rows: tuple[KeyEntry, ...]
    has_previous: bool
    has_next: bool


@dataclass(frozen=True, slots=True)
class ChildRef:
    """A task submitted from another task (its ``parent_id``)."""

    id: str
    name: str
    queue: str
    status: str
    created_at_ms: int


@dataclass(frozen=True, slots=True)
class TaskDetail:
    """A task with everything around it: its keys, its lineage, its children."""

    task: Task
    keys: tuple[str, ...]
    parent: TaskRef | None
    root: TaskRef | None
    children: tuple[ChildRef, ...]
    children_capped: bool = False
