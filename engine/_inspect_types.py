"""The values the ``Inspector`` answers with: filters, pages, counts, leases, keys.

Plain frozen dataclasses with no I/O, shared by the inspector's read modules and
re-exported by ``engine.inspection``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from engine._models import Task, TaskRef, TaskStatus
from engine._rules import status as check_status

SearchKind = Literal["id", "key", "payload", "error"]
SEARCH_KINDS: tuple[SearchKind, ...] = ("id", "key", "payload", "error")
#: What a task list sorts by: creation (id order), due time, last update, completion.
SortKey = Literal["created", "due", "updated", "completed"]
SORT_KEYS: tuple[SortKey, ...] = ("created", "due", "updated", "completed")
PageOrder = Literal["id", "key", "due", "updated", "completed", "failure"]

#: Default ceiling of a count: beyond it the console shows "10,000+".
DEFAULT_COUNT_CAP = 10_000
#: Names counted one by one per queue and status by ``Inspector.name_counts``.
DEFAULT_NAMES_PER_QUEUE = 50
#: How many tasks a payload text search reads per page at most (and the window a
#: sort by due or updated time orders).
DEFAULT_PAYLOAD_SCAN = 50_000
#: How many of the newest failures the failure groups read.
DEFAULT_ERROR_WINDOW = 100_000
#: How many of the newest failures an error search reads at most. A search whose
#: text few failures hold reads the whole window (every row's error is decoded,
#: ~2.3 us of CPU each on SQLite, ~9 us on a loaded Postgres with no index of
#: ours), so this bounds a page's cost;
#: the page says how many it searched and a caller may ask for more.
DEFAULT_SEARCH_WINDOW = 10_000


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
    """What a task page shows: equality filters, one optional search, an order.

    ``search`` is an id prefix, a key prefix, a payload substring or error text
    (the error envelope's type and message, case-insensitive), per
    ``search_kind``; empty or None means no search. ``sort`` and ``descending``
    order the list; ``since_ms``/``until_ms`` keep the tasks whose time of that
    same kind (created, due, updated, completed) is within ``[since, until)``.
    A key search lists in key order and an error search newest failure first,
    whatever ``sort`` says.
    """

    status: str | None = None
    queue: str | None = None
    name: str | None = None
    search: str | None = None
    search_kind: SearchKind = "id"
    sort: SortKey = "created"
    descending: bool = True
    since_ms: int | None = None
    until_ms: int | None = None

    def __post_init__(self) -> None:
        check_status(self.status)
        if self.search_kind not in SEARCH_KINDS:
            raise ValueError(f"unknown search kind {self.search_kind!r}; expected {SEARCH_KINDS}")
        if self.sort not in SORT_KEYS:
            raise ValueError(f"unknown sort {self.sort!r}; expected one of {SORT_KEYS}")
        if not isinstance(self.descending, bool):
            raise ValueError("descending must be True or False")
        for what in ("queue", "name", "search"):
            value = getattr(self, what)
            if value is not None and not isinstance(value, str):
                raise ValueError(f"{what} must be a string or None")
        for what in ("since_ms", "until_ms"):
            value = getattr(self, what)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise ValueError(f"{what} must be epoch milliseconds (int) or None")
        if (
            self.since_ms is not None
            and self.until_ms is not None
            and self.since_ms >= self.until_ms
        ):
            raise ValueError("since_ms must be earlier than until_ms")

    @property
    def has_time_range(self) -> bool:
        """True when ``since_ms`` or ``until_ms`` bounds the list."""
        return self.since_ms is not None or self.until_ms is not None

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
    #: For a failed task, or a queued one retrying after an error: the envelope's
    #: type and the first line of its message (None otherwise).
    error_type: str | None = None
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class TaskPage:
    """One page of tasks and how to move from it.

    ``order`` is ``"id"`` (creation order), ``"key"`` (a key search, in key
    order), ``"due"``, ``"updated"`` or ``"completed"`` (a sort by that time) or
    ``"failure"`` (an error search, by the time of the failure);
    ``first_cursor``/``last_cursor`` are the cursors of the first and last row: the
    id, the key, or ``"<ms>:<id>"`` for a time order. ``total`` is the capped count
    of every matching task (None when only a window was read). ``window_note``
    says what a windowed read covered ("searched the newest 100,000 failures").
    """

    rows: tuple[TaskSummary, ...]
    order: PageOrder
    has_previous: bool
    has_next: bool
    total: CappedCount | None
    scan_limit: int | None = None
    window_note: str | None = None

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
        if self.order == "key":
            return row.key
        if self.order == "id":
            return row.id
        return f"{order_time(row, self.order)}:{row.id}"


def order_time(row: TaskSummary, order: PageOrder) -> int:
    """The time a row is ordered by in a time-ordered page."""
    if order == "due":
        return row.run_at_ms
    if order == "updated":
        return row.updated_at_ms
    if order == "completed":
        return row.completed_at_ms if row.completed_at_ms is not None else 0
    # "failure": a failed task's completion, a retrying one's last update.
    return row.completed_at_ms if row.completed_at_ms is not None else row.updated_at_ms


def parse_time_cursor(cursor: str) -> tuple[int, str]:
    """``"<ms>:<id>"`` back into its parts.

    Raises:
        ValueError: not a cursor of a time-ordered page.
    """
    ms, sep, task_id = cursor.partition(":")
    try:
        if not sep or not task_id:
            raise ValueError
        return int(ms), task_id
    except ValueError:
        raise ValueError(f"{cursor!r} is not a cursor of a time-ordered page") from None


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


def opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


def first_line(text: Any, width: int = 200) -> str | None:
    """The first line of an error message, at most ``width`` characters (None stays None)."""
    if text is None:
        return None
    line = str(text).split("\n", 1)[0].rstrip("\r")
    return line[:width]


def summary_from_row(row: Mapping[str, Any]) -> TaskSummary:
    """A ``TaskSummary`` from a page statement's row (error columns when it has them)."""
    error_type = row.get("error_type")
    return TaskSummary(
        id=row["id"],
        name=row["name"],
        queue=row["queue"],
        status=row["status"],
        attempt=int(row["attempt"]),
        max_attempts=int(row["max_attempts"]),
        priority=int(row["priority"]),
        worker_id=row["worker_id"],
        lease_until_ms=opt_int(row["lease_until_ms"]),
        run_at_ms=int(row["run_at_ms"]),
        cancel_requested_at_ms=opt_int(row["cancel_requested_at_ms"]),
        progress=row["progress"],
        message=row["message"],
        created_at_ms=int(row["created_at_ms"]),
        updated_at_ms=int(row["updated_at_ms"]),
        completed_at_ms=opt_int(row["completed_at_ms"]),
        key=row.get("key"),
        error_type=None if error_type is None else str(error_type),
        error_message=first_line(row.get("error_message")),
    )
