"""Read-only introspection for consoles and dashboards, safe on very big databases.

``Inspector`` answers what an operator looks at — pages of tasks, queues with
their counts and latency, running leases, the key table — through the named
statements ``sql/<dialect>/inspect_*.sql``, run by ``TaskStore.read_statement``.
Every read is bounded: pages walk an index from a keyset cursor (never OFFSET),
counts stop at a cap, queues and names come from skip scans of their indexes.
The protocol fixes the schema, so the statements are shaped around its indexes
(docs/protocol-notes.md, "Indexes") rather than the other way round.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from engine import _json
from engine._clock import now_ms
from engine._models import STATUSES, Task, TaskRef, TaskStatus
from engine._rules import status as check_status
from engine.store._base import TaskStore

SearchKind = Literal["id", "key", "payload"]
SEARCH_KINDS: tuple[SearchKind, ...] = ("id", "key", "payload")

#: Default ceiling of a count: beyond it the console shows "10,000+".
DEFAULT_COUNT_CAP = 10_000
#: How many tasks a payload text search reads per page at most.
DEFAULT_PAYLOAD_SCAN = 50_000
_CROCKFORD = frozenset("0123456789ABCDEFGHJKMNPQRSTVWXYZ")


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


def prefix_range(prefix: str) -> tuple[str, str | None]:
    """``[from, to)`` bounds of the strings starting with ``prefix`` (``to`` None = open).

    Binary (SQLite) and C-collation (Postgres) order put every string with the
    prefix inside these bounds, so a prefix search becomes an index range seek.
    """
    stem = prefix
    while stem:
        last = ord(stem[-1])
        if last < 0x10FFFF:
            return prefix, stem[:-1] + chr(last + 1)
        stem = stem[:-1]
    return prefix, None


def normalise_id_prefix(text: str) -> str:
    """An id prefix as stored: ``task_`` + upper-case Crockford digits.

    ``01j9`` and ``TASK_01J9`` both become ``task_01J9``; anything else is kept.
    """
    text = text.strip()
    body = text[5:] if text.lower().startswith("task_") else text
    if body and set(body.upper()) <= _CROCKFORD:
        return "task_" + body.upper()
    return text


def is_id_tail(flt: TaskFilter, total: CappedCount | None) -> bool:
    """True when an id search matched no id prefix but could be the end of one.

    The random part of an id is what people copy from logs; four or more Crockford
    digits without the ``task_`` prefix are searched inside ids instead.
    """
    text = (flt.active_search or "").strip()
    return (
        flt.search_kind == "id"
        and total is not None
        and total.value == 0
        and len(text) >= 4
        and not text.lower().startswith("task_")
        and set(text.upper()) <= _CROCKFORD
    )


class Inspector:
    """Bounded reads over one store, for a console that refreshes every second.

    Args:
        store: a connected ``TaskStore`` (read-only is enough).
        count_cap: the default ceiling of counts (``CappedCount``).
        payload_scan: tasks read per page by a payload text search.
        clock: epoch ms, used for "due" and "older than" (the console's clock).
    """

    def __init__(
        self,
        store: TaskStore,
        *,
        count_cap: int = DEFAULT_COUNT_CAP,
        payload_scan: int = DEFAULT_PAYLOAD_SCAN,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        if count_cap < 1 or payload_scan < 1:
            raise ValueError("count_cap and payload_scan must be >= 1")
        self.store = store
        self.count_cap = count_cap
        self.payload_scan = payload_scan
        self.clock = clock

    async def _read(self, name: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        return await self.store.read_statement(name, params)

    # -- tasks --------------------------------------------------------------------

    def _filter_params(self, flt: TaskFilter) -> dict[str, Any]:
        params: dict[str, Any] = {"status": flt.status, "queue": flt.queue, "name": flt.name}
        search = flt.active_search
        # Every statement that takes the id range gets it, open when there is no id
        # search: an empty key or payload search is no search at all.
        id_from, id_to = (
            prefix_range(normalise_id_prefix(search))
            if search and flt.search_kind == "id"
            else (None, None)
        )
        params.update(id_from=id_from, id_to=id_to)
        if flt.search_kind == "key" and search:
            params["key_from"], params["key_to"] = prefix_range(search)
        return params

    async def count_tasks(self, flt: TaskFilter, *, cap: int | None = None) -> CappedCount | None:
        """How many tasks match ``flt``, up to ``cap``; None for a payload search.

        Raises:
            ValueError: ``cap`` below 1.
        """
        cap = self._cap(cap)
        if flt.search_kind == "payload" and flt.active_search:
            return None
        params = self._filter_params(flt)
        name = "inspect_count_tasks_by_key" if "key_from" in params else "inspect_count_tasks"
        rows = await self._read(name, {**params, "cap": cap})
        return CappedCount(int(rows[0]["n"]), cap)

    async def tasks_page(
        self,
        flt: TaskFilter,
        *,
        before: str | None = None,
        after: str | None = None,
        limit: int = 50,
        total: CappedCount | None = None,
    ) -> TaskPage:
        """A page of tasks matching ``flt``.

        Newest first (by id, i.e. creation time), or in key order for a key search.
        ``before`` pages towards older tasks (later keys), ``after`` towards newer
        ones (earlier keys); neither gives the first page. A page asked with
        ``after`` that comes back short is replaced by the first page.

        Args:
            flt: filters and search.
            before: cursor (``last_cursor`` of the page shown) for the next page.
            after: cursor (``first_cursor`` of the page shown) for the previous page.
            limit: rows per page (1..1000).
            total: a count already known for ``flt`` (skips counting again).

        Raises:
            ValueError: both cursors given, or a bad limit.
        """
        if before is not None and after is not None:
            raise ValueError("give at most one of before and after")
        if not 1 <= limit <= 1000:
            raise ValueError(f"limit must be within 1..1000, got {limit}")
        if total is None:
            total = await self.count_tasks(flt)
        forward = after is None
        params = self._filter_params(flt)
        search = flt.active_search
        scan_limit: int | None = None
        if flt.search_kind == "key" and search:
            order: Literal["id", "key"] = "key"
            name = "inspect_tasks_by_key_after" if forward else "inspect_tasks_by_key_before"
            if forward:
                params["after_key"] = before
            else:
                # The cursor is the tighter upper bound; an open key_to lets the seek use it.
                params.update(before_key=after, key_to=None)
        else:
            order = "id"
            if is_id_tail(flt, total):
                # No id starts with the text: look for it inside the ids (people copy
                # the end of an id), within a bounded window like a payload search.
                name = "inspect_tasks_id_tail_older" if forward else "inspect_tasks_id_tail_newer"
                scan_limit = self.payload_scan
                params.update(text=(search or "").strip().upper(), scan_limit=scan_limit)
                total = None
            elif flt.search_kind == "payload" and search:
                name = "inspect_tasks_payload_older" if forward else "inspect_tasks_payload_newer"
                scan_limit = self.payload_scan
                params.update(text=search, scan_limit=scan_limit)
            else:
                # A filter matching few rows is found through its index and sorted;
                # one matching many is found by walking ids in order (see the SQL).
                sparse = (
                    total is not None
                    and not total.at_least
                    and any(params.get(k) is not None for k in ("status", "queue", "name"))
                )
                stem = "inspect_tasks_sparse" if sparse else "inspect_tasks"
                name = f"{stem}_older" if forward else f"{stem}_newer"
            if forward:
                params["before_id"] = before
            else:
                params["after_id"] = after
        rows = await self._read(name, {**params, "limit": limit + 1})
        more = len(rows) > limit
        rows = rows[:limit]
        if not forward:
            if not more:
                return await self.tasks_page(flt, limit=limit, total=total)
            rows.reverse()
        summaries = tuple(_summary(r) for r in rows)
        return TaskPage(
            rows=summaries,
            order=order,
            has_previous=(before is not None) if forward else True,
            has_next=more if forward else True,
            total=total,
            scan_limit=scan_limit,
        )

    async def matching_ids(
        self, flt: TaskFilter, *, statuses: Iterable[str], cap: int | None = None
    ) -> list[str]:
        """Ids of up to ``cap`` tasks matching ``flt`` whose status is in ``statuses``.

        What a bulk action (cancel or retry everything matching) works on, newest
        first, read page by page.
        """
        cap = self._cap(cap)
        wanted = {check_status(s) for s in statuses}
        out: list[str] = []
        cursor: str | None = None
        while len(out) < cap:
            page = await self.tasks_page(flt, before=cursor, limit=500, total=None)
            out.extend(r.id for r in page.rows if r.status in wanted)
            if not page.has_next:
                break
            cursor = page.last_cursor
        return out[:cap]

    async def keys_for_tasks(self, task_ids: Sequence[str]) -> dict[str, list[str]]:
        """``{task_id: [keys pointing at it]}`` for the given ids (absent: no key).

        ``cairnq_task_keys`` has no index on ``task_id``: each call reads the key
        table once, so callers batch ids and remember answers.
        """
        if not task_ids:
            return {}
        ids: Any = list(task_ids)
        if self.store.dialect == "sqlite":
            ids = _json.dumps(ids)
        out: dict[str, list[str]] = {}
        for row in await self._read("inspect_task_keys", {"ids": ids}):
            out.setdefault(row["task_id"], []).append(row["key"])
        return out

    async def task_detail(self, task_id: str, *, children_limit: int = 50) -> TaskDetail | None:
        """The task with its keys, parent, root and children; None if unknown."""
        task = await self.store.get(task_id)
        if task is None:
            return None
        keys = (await self.keys_for_tasks([task.id])).get(task.id, [])
        parent = await self.store.get_status(task.parent_id) if task.parent_id else None
        root = None
        if task.root_id and task.root_id != task.id:
            root = await self.store.get_status(task.root_id)
        children: list[ChildRef] = []
        if task.root_id:
            rows = await self._read(
                "inspect_children",
                {"root_id": task.root_id, "parent_id": task.id, "limit": children_limit + 1},
            )
            children = [
                ChildRef(r["id"], r["name"], r["queue"], r["status"], int(r["created_at_ms"]))
                for r in rows
            ]
        return TaskDetail(
            task=task,
            keys=tuple(keys),
            parent=parent,
            root=root,
            children=tuple(children[:children_limit]),
            children_capped=len(children) > children_limit,
        )

    # -- queues -----------------------------------------------------------------------

    async def queues(self, *, limit: int = 1000) -> list[str]:
        """Every queue that holds a task, in name order (one index seek per queue)."""
        return [r["queue"] for r in await self._read("inspect_queues", {"limit": limit})]

    async def names(self, *, limit: int = 1000) -> list[str]:
        """Every task name in the database, in order (one index seek per name)."""
        return [r["name"] for r in await self._read("inspect_names", {"limit": limit})]

    async def names_containing(
        self, text: str, *, limit: int = 20, scan: int = 10_000
    ) -> list[str]:
        """Task names containing ``text`` (plain text, case-sensitive), in name order.

        At most ``scan`` distinct names are visited and ``limit`` returned.
        """
        if not text:
            return []
        rows = await self._read(
            "inspect_names_containing", {"text": text, "scan": scan, "limit": limit}
        )
        return [r["name"] for r in rows]

    async def queue_counts(self, *, cap: int | None = None) -> dict[str, dict[str, CappedCount]]:
        """``{queue: {status: count}}`` for every queue, each count capped, zero-filled."""
        cap = self._cap(cap)
        out: dict[str, dict[str, CappedCount]] = {}
        for row in await self._read("inspect_queue_counts", {"cap": cap}):
            per = out.setdefault(row["queue"], {s: CappedCount(0, cap) for s in STATUSES})
            per[row["status"]] = CappedCount(int(row["n"]), cap)
        return out

    async def queue_latency(self) -> dict[str, QueueLatency]:
        """Per queue with queued tasks: the oldest due one and the next delayed one."""
        rows = await self._read("inspect_queue_oldest_due", {"now_ms": self.clock()})
        return {
            r["queue"]: QueueLatency(
                r["queue"], _opt_int(r["oldest_due_ms"]), _opt_int(r["next_delayed_ms"])
            )
            for r in rows
        }

    async def throughput(self, *, minutes: int = 15) -> list[ThroughputBucket]:
        """Terminal entries per queue, status and minute over the last ``minutes``."""
        if minutes < 1:
            raise ValueError("minutes must be >= 1")
        since = (self.clock() // 60_000 - minutes + 1) * 60_000
        rows = await self._read("inspect_throughput", {"since_ms": since})
        return [
            ThroughputBucket(r["queue"], r["status"], int(r["minute"]), int(r["n"])) for r in rows
        ]

    async def recent_finished(self, *, window_ms: int = 60_000) -> dict[str, dict[str, int]]:
        """``{queue: {"succeeded": n, "failed": n}}`` over the last ``window_ms`` (rolling).

        Raises:
            ValueError: ``window_ms`` below 1.
        """
        if window_ms < 1:
            raise ValueError("window_ms must be >= 1")
        rows = await self._read("inspect_recent_finished", {"since_ms": self.clock() - window_ms})
        out: dict[str, dict[str, int]] = {}
        for r in rows:
            out.setdefault(r["queue"], {})[r["status"]] = int(r["n"])
        return out

    # -- leases, keys, purge ---------------------------------------------------------------

    async def running(self, *, limit: int = 500) -> list[LeaseInfo]:
        """Running tasks, soonest lease expiry first (expired ones lead)."""
        rows = await self._read("inspect_running", {"limit": limit})
        return [
            LeaseInfo(
                id=r["id"],
                name=r["name"],
                queue=r["queue"],
                worker_id=r["worker_id"],
                attempt=int(r["attempt"]),
                max_attempts=int(r["max_attempts"]),
                lease_until_ms=int(r["lease_until_ms"]),
                cancel_requested_at_ms=_opt_int(r["cancel_requested_at_ms"]),
                progress=r["progress"],
                message=r["message"],
                updated_at_ms=int(r["updated_at_ms"]),
            )
            for r in rows
        ]

    async def keys_page(
        self,
        prefix: str | None = None,
        *,
        after: str | None = None,
        before: str | None = None,
        limit: int = 50,
    ) -> KeyPage:
        """A page of keys (optionally starting with ``prefix``) in key order.

        ``after`` moves forward from a page's last key, ``before`` back from its
        first; a short backward page is replaced by the first page.
        """
        if after is not None and before is not None:
            raise ValueError("give at most one of before and after")
        key_from, key_to = prefix_range(prefix) if prefix else (None, None)
        forward = before is None
        params: dict[str, Any] = {"key_from": key_from, "key_to": key_to, "limit": limit + 1}
        if forward:
            params["after_key"] = after
        else:
            params.update(before_key=before, key_to=None)
        rows = await self._read("inspect_keys_after" if forward else "inspect_keys_before", params)
        more = len(rows) > limit
        rows = rows[:limit]
        if not forward:
            if not more:
                return await self.keys_page(prefix, limit=limit)
            rows.reverse()
        entries = tuple(
            KeyEntry(
                key=r["key"],
                task_id=r["task_id"],
                status=r["status"],
                name=r["name"],
                queue=r["queue"],
                created_at_ms=int(r["created_at_ms"]),
                updated_at_ms=int(r["updated_at_ms"]),
            )
            for r in rows
        )
        return KeyPage(
            rows=entries,
            has_previous=(after is not None) if forward else True,
            has_next=more if forward else True,
        )

    async def count_purgeable(
        self,
        *,
        older_than_ms: int = 0,
        queue: str | None = None,
        status: str | None = None,
        name: str | None = None,
        cap: int | None = None,
    ) -> CappedCount:
        """How many tasks ``purge`` with the same arguments would consider (capped).

        Raises:
            ValueError: a negative age or a non-terminal status.
        """
        if older_than_ms < 0:
            raise ValueError("older_than_ms must be >= 0")
        check_status(status, terminal_only=True)
        cap = self._cap(cap)
        params = {
            "before_ms": self.clock() - older_than_ms,
            "queue": queue,
            "status": status,
            "name": name,
            "cap": cap,
        }
        rows = await self._read("inspect_count_purgeable", params)
        return CappedCount(int(rows[0]["n"]), cap)

    async def meta(self) -> dict[str, str]:
        """The ``cairnq_meta`` rows (``protocol_version``, ``schema_version``)."""
        return {r["key"]: str(r["value"]) for r in await self._read("inspect_meta", {})}

    def _cap(self, cap: int | None) -> int:
        cap = self.count_cap if cap is None else cap
        if cap < 1:
            raise ValueError(f"cap must be >= 1, got {cap}")
        return cap


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _summary(row: Mapping[str, Any]) -> TaskSummary:
    return TaskSummary(
        id=row["id"],
        name=row["name"],
        queue=row["queue"],
        status=row["status"],
        attempt=int(row["attempt"]),
        max_attempts=int(row["max_attempts"]),
        priority=int(row["priority"]),
        worker_id=row["worker_id"],
        lease_until_ms=_opt_int(row["lease_until_ms"]),
        run_at_ms=int(row["run_at_ms"]),
        cancel_requested_at_ms=_opt_int(row["cancel_requested_at_ms"]),
        progress=row["progress"],
        message=row["message"],
        created_at_ms=int(row["created_at_ms"]),
        updated_at_ms=int(row["updated_at_ms"]),
        completed_at_ms=_opt_int(row["completed_at_ms"]),
        key=row.get("key"),
    )


@dataclass(frozen=True, slots=True)
class SQLiteFileKind:
    """What a path holds, checked read-only before a store opens (and migrates) it.

    ``kind``: ``"missing"``, ``"empty"`` (a zero-byte file), ``"cairnq"`` (has
    ``cairnq_tasks``), ``"foreign"`` (a SQLite database without it; ``tables``
    lists what it holds), ``"locked"`` (another connection holds it, e.g. a
    rollback-journal database in an exclusive transaction: what it is cannot be
    read now; opening a store on it raises ``StoreLocked``) or ``"not-sqlite"``
    (``detail`` says why).
    """

    kind: Literal["missing", "empty", "cairnq", "foreign", "locked", "not-sqlite"]
    tables: tuple[str, ...] = ()
    detail: str = ""


#: How long ``describe_sqlite_file`` waits for another connection's lock.
_DESCRIBE_WAIT_S = 1.0
_SQLITE_BUSY, _SQLITE_LOCKED = 5, 6


def describe_sqlite_file(path: str) -> SQLiteFileKind:
    """Look at ``path`` without writing to it (not even the journal mode).

    A store opened with migrations on would create the cairnq tables in any
    SQLite file; a console pointed at the wrong file must refuse instead.
    """
    file = Path(path)
    if not file.exists():
        return SQLiteFileKind("missing")
    if file.is_dir():
        return SQLiteFileKind("not-sqlite", detail="it is a directory")
    if file.stat().st_size == 0:
        return SQLiteFileKind("empty")
    if not os.access(file, os.R_OK):
        return SQLiteFileKind("not-sqlite", detail="permission denied")
    try:
        conn = sqlite3.connect(
            file.resolve().as_uri() + "?mode=ro", uri=True, timeout=_DESCRIBE_WAIT_S
        )
        try:
            rows = conn.execute(
                "select name from sqlite_master where type = 'table' order by name"
            ).fetchall()
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        if exc.sqlite_errorcode & 0xFF in (_SQLITE_BUSY, _SQLITE_LOCKED):
            return SQLiteFileKind("locked", detail=str(exc))
        return SQLiteFileKind("not-sqlite", detail=str(exc))
    tables = tuple(str(r[0]) for r in rows)
    return SQLiteFileKind("cairnq" if "cairnq_tasks" in tables else "foreign", tables)
