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

import copy
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from engine import _fleet, _json, _metrics, _task_order, _triage
from engine._clock import now_ms
from engine._inspect_search import id_at, is_id_tail, normalise_id_prefix, prefix_range
from engine._inspect_types import (
    DEFAULT_COUNT_CAP,
    DEFAULT_ERROR_WINDOW,
    DEFAULT_NAMES_PER_QUEUE,
    DEFAULT_PAYLOAD_SCAN,
    DEFAULT_SEARCH_WINDOW,
    CappedCount,
    ChildRef,
    KeyEntry,
    KeyPage,
    LeaseInfo,
    PageOrder,
    QueueLatency,
    TaskDetail,
    TaskFilter,
    TaskPage,
    TaskSummary,
    ThroughputBucket,
    first_line,
    opt_int,
    summary_from_row,
)
from engine._metrics import DEFAULT_METRICS_CAP, DEFAULT_METRICS_SAMPLE, Metrics
from engine._models import STATUSES
from engine._rules import status as check_status
from engine._triage_types import FailureGroup, FailureGroups, FailureSelection, WorkerLeases
from engine.store._base import TaskStore


class Inspector:
    """Bounded reads over one store, for a console that refreshes every second.

    Args:
        store: a connected ``TaskStore`` (read-only is enough).
        count_cap: the default ceiling of counts (``CappedCount``).
        payload_scan: tasks read per page by a payload text search (and the window
            a sort by due or updated time orders).
        error_window: the newest failures the failure groups read at most.
        search_window: the newest failures an error search reads at most (its
            pages say how many they searched).
        clock: epoch ms, used for "due" and "older than" (the console's clock).
        background: read on the store's background lane (``read_statement``):
            for a recorder sampling beside a console that refreshes.
    """

    def __init__(
        self,
        store: TaskStore,
        *,
        count_cap: int = DEFAULT_COUNT_CAP,
        payload_scan: int = DEFAULT_PAYLOAD_SCAN,
        error_window: int = DEFAULT_ERROR_WINDOW,
        search_window: int = DEFAULT_SEARCH_WINDOW,
        clock: Callable[[], int] = now_ms,
        background: bool = False,
    ) -> None:
        if count_cap < 1 or payload_scan < 1 or error_window < 1 or search_window < 1:
            raise ValueError("count_cap, payload_scan, error_window and search_window must be >= 1")
        self.store = store
        self.count_cap = count_cap
        self.payload_scan = payload_scan
        self.error_window = error_window
        self.search_window = search_window
        #: (valid until, monotonic s; floor_ms; failures held) of the error window.
        self.window_edge: tuple[float, int, int] | None = None
        self.clock = clock
        self.background = background

    def in_background(self) -> Inspector:
        """This inspector reading on the store's background lane."""
        twin = copy.copy(self)
        twin.background = True
        return twin

    async def _read(self, name: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        if self.background:
            return await self.store.read_statement(name, params, background=True)
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
        if flt.sort == "created" and flt.has_time_range:
            # Ids lead with their creation millisecond: a creation time range is an
            # id range, intersected with an id-prefix search's.
            if flt.since_ms is not None:
                floor = id_at(flt.since_ms)
                params["id_from"] = max(floor, params["id_from"] or floor)
            if flt.until_ms is not None:
                ceiling = id_at(flt.until_ms)
                params["id_to"] = min(ceiling, params["id_to"] or ceiling)
        return params

    async def count_tasks(self, flt: TaskFilter, *, cap: int | None = None) -> CappedCount | None:
        """How many tasks match ``flt``, up to ``cap``; None for a payload search.

        Raises:
            ValueError: ``cap`` below 1.
        """
        cap = self._cap(cap)
        if flt.search_kind in ("payload", "error") and flt.active_search:
            return None
        if flt.has_time_range and flt.sort != "created":
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

        In ``flt.sort`` order (creation by default, i.e. id order; due, updated or
        completed time), newest first unless ``flt.descending`` is False; in key
        order for a key search; newest failure first for an error search (a
        window of the newest ``search_window`` failures, said in ``window_note``).
        Rows of failed and retrying tasks carry their error's type and first line.
        ``before`` pages forward (the next page in that order), ``after`` back;
        neither gives the first page. A page asked with ``after`` that comes back
        short is replaced by the first page.

        Args:
            flt: filters and search.
            before: cursor (``last_cursor`` of the page shown) for the next page.
            after: cursor (``first_cursor`` of the page shown) for the previous page.
            limit: rows per page (1..1000).
            total: a count already known for ``flt`` (skips counting again).

        Raises:
            ValueError: both cursors given, a bad limit, or a cursor of another order.
        """
        if before is not None and after is not None:
            raise ValueError("give at most one of before and after")
        if not 1 <= limit <= 1000:
            raise ValueError(f"limit must be within 1..1000, got {limit}")
        if flt.search_kind == "error" and flt.active_search:
            return await _triage.error_page(self, flt, before=before, after=after, limit=limit)
        if flt.sort != "created" and not flt.active_search:
            return await _task_order.sorted_page(
                self, flt, before=before, after=after, limit=limit, total=total
            )
        if total is None:
            total = await self.count_tasks(flt)
        forward = after is None
        params = self._filter_params(flt)
        search = flt.active_search
        scan_limit: int | None = None
        if flt.search_kind == "key" and search:
            order: PageOrder = "key"
            name = "inspect_tasks_by_key_after" if forward else "inspect_tasks_by_key_before"
            if forward:
                params["after_key"] = before
            else:
                # The cursor is the tighter upper bound; an open key_to lets the seek use it.
                params.update(before_key=after, key_to=None)
        else:
            order = "id"
            # Newest first walks towards older ids; oldest first (ascending) the other
            # way; a previous page walks against the display order and is reversed.
            older = forward == flt.descending
            if is_id_tail(flt, total):
                # No id starts with the text: look for it inside the ids (people copy
                # the end of an id), within a bounded window like a payload search.
                stem = "inspect_tasks_id_tail"
                scan_limit = self.payload_scan
                params.update(text=(search or "").strip().upper(), scan_limit=scan_limit)
                total = None
            elif flt.search_kind == "payload" and search:
                stem = "inspect_tasks_payload"
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
            name = f"{stem}_older" if older else f"{stem}_newer"
            params["before_id" if older else "after_id"] = before if forward else after
        rows = await self._read(name, {**params, "limit": limit + 1})
        more = len(rows) > limit
        rows = rows[:limit]
        if not forward:
            if not more:
                return await self.tasks_page(flt, limit=limit, total=total)
            rows.reverse()
        summaries = await self.with_errors([summary_from_row(r) for r in rows])
        return TaskPage(
            rows=tuple(summaries),
            order=order,
            has_previous=(before is not None) if forward else True,
            has_next=more if forward else True,
            total=total,
            scan_limit=scan_limit,
        )

    async def summaries(self, task_ids: Sequence[str]) -> list[TaskSummary]:
        """The listed tasks' rows (error columns filled), newest first; unknown ids
        are left out. At most 1,000 ids (a page of a failure group or a selection).

        Raises:
            ValueError: more than 1,000 ids.
        """
        if len(task_ids) > 1_000:
            raise ValueError(f"at most 1,000 ids per call, got {len(task_ids):,}")
        if not task_ids:
            return []
        wanted = list(task_ids)
        ids: Any = wanted if self.store.dialect == "postgres" else _json.dumps(wanted)
        rows = await self._read("inspect_tasks_by_ids", {"ids": ids})
        return await self.with_errors([summary_from_row(r) for r in rows])

    async def with_errors(self, rows: Sequence[TaskSummary]) -> list[TaskSummary]:
        """``rows`` with the error columns filled for failed and retrying tasks.

        One primary-key lookup per such row (``inspect_task_errors``).
        """
        wanted = [r.id for r in rows if r.status in ("failed", "queued") and r.error_type is None]
        if not wanted:
            return list(rows)
        ids: Any = wanted if self.store.dialect == "postgres" else _json.dumps(wanted)
        found = {r["id"]: r for r in await self._read("inspect_task_errors", {"ids": ids})}
        out = []
        for row in rows:
            hit = found.get(row.id)
            if hit is not None:
                row = replace(
                    row,
                    error_type=None if hit["error_type"] is None else str(hit["error_type"]),
                    error_message=first_line(hit["error_message"]),
                )
            out.append(row)
        return out

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

    async def name_counts(
        self, *, cap: int | None = None, names: int = DEFAULT_NAMES_PER_QUEUE, live: bool = False
    ) -> dict[tuple[str, str | None, str], CappedCount]:
        """``{(queue, name, status): count}``, each capped, zero counts left out.

        Per queue and status the first ``names`` names (in name order) are
        counted one by one; the tasks of any further names are counted together
        under the name None ("other"). Bounded by the index entries it may count:
        queues x 5 x (``names`` + 1) x ``cap``. ``live``: the queued and running
        tasks only (a backlog is small where finished tasks pile up: cheap).
        """
        cap = self._cap(cap)
        if isinstance(names, bool) or not isinstance(names, int) or names < 1:
            raise ValueError(f"names must be a positive integer, got {names!r}")
        out: dict[tuple[str, str | None, str], CappedCount] = {}
        params = {"cap": cap, "names": names, "live": int(bool(live))}
        for row in await self._read("inspect_name_counts", params):
            if row["n"]:
                out[(row["queue"], row["name"], row["status"])] = CappedCount(int(row["n"]), cap)
        return out

    async def queue_latency(self) -> dict[str, QueueLatency]:
        """Per queue with queued tasks: the oldest due one and the next delayed one."""
        rows = await self._read("inspect_queue_oldest_due", {"now_ms": self.clock()})
        return {
            r["queue"]: QueueLatency(
                r["queue"], opt_int(r["oldest_due_ms"]), opt_int(r["next_delayed_ms"])
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

    # -- failure triage, history, workers (engine._triage, _metrics, _fleet) ------------

    async def failure_groups(
        self, *, window_ms: int | None = 86_400_000, buckets: int = 30, cap: int | None = None
    ) -> FailureGroups:
        """Failed tasks grouped by name, error type and masked first message line.

        Over the failures completed in the last ``window_ms`` (None = every one
        retained), at most the newest ``cap`` (default ``error_window``): count,
        first and last seen, ``buckets`` counts across the window, an example task.

        Raises:
            ValueError: a bad window, bucket count or cap.
        """
        return await _triage.failure_groups(self, window_ms=window_ms, buckets=buckets, cap=cap)

    async def failure_selection(
        self,
        group: FailureGroup | tuple[str, str, str],
        *,
        window_ms: int | None = 86_400_000,
        limit: int = 1_000,
        cap: int | None = None,
    ) -> FailureSelection:
        """The tasks of one failure group (the same window): an exact count and up
        to ``limit`` ids, newest first, for a group retry, cancel or purge."""
        return await _triage.failure_selection(
            self, group, window_ms=window_ms, limit=limit, cap=cap
        )

    async def metrics(
        self,
        *,
        window_ms: int = 3_600_000,
        buckets: int = 60,
        cap: int = DEFAULT_METRICS_CAP,
        sample: int = DEFAULT_METRICS_SAMPLE,
    ) -> Metrics:
        """Per queue and name over the last ``window_ms``: finished tasks per bucket
        (whole minutes) by status, and due-to-done latency p50 / p95 / p99.

        Exact when the window holds at most ``sample`` completions; above that,
        estimated from a sample of about ``sample`` rows spread over the window,
        each bucket scaled to its exact per-status total (``Metrics.estimated``,
        ``Metrics.note``).

        Raises:
            ValueError: a window under a minute, or a bad bucket count, cap or sample.
        """
        return await _metrics.metrics(
            self, window_ms=window_ms, buckets=buckets, cap=cap, sample=sample
        )

    async def workers(self, *, limit: int = 10_000) -> list[WorkerLeases]:
        """Every worker id holding a lease now (from the running rows, at most
        ``limit`` of them): tasks held, names, the shortest lease left and the
        tasks whose lease expired unrenewed (waiting for recovery). Workers that
        stopped heartbeating come first."""
        return await _fleet.workers(self, limit=limit)

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
                cancel_requested_at_ms=opt_int(r["cancel_requested_at_ms"]),
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
