"""The SQLite store's protocol operations: each one statement or one transaction.

``SQLiteOperations`` implements ``TaskStore``'s primitives for submits and keyed
submits, reads, cancel / retry / purge, a one-draw claim and the owned writes
on top of the plumbing ``SQLiteStore`` provides (``_write`` through group
commit, ``_fetch`` on the reader, ``_retrying`` on the writer connection).
Claim sessions, which hold the writer connection across a plan, stay beside
that plumbing in ``sqlite.py``.
"""

from __future__ import annotations

import abc
import builtins
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from engine import _json
from engine._clock import now_ms
from engine._errors import AlreadyExists, LostLease
from engine._models import TASK_COLUMNS, SubmitOutcome, Task, TaskRef, in_claim_order
from engine._sql import statement
from engine.store import _sqlite_sync as sync
from engine.store._base import (
    LEASE_EXPIRED_JSON,
    NewTask,
    OwnedSettle,
    TaskStore,
    insert_params,
    keyed_choice,
    task_from_values,
    undecodable,
)

T = TypeVar("T")
R = TypeVar("R")
_TASK_WIDTH = len(TASK_COLUMNS)


def _sql(name: str) -> str:
    return statement("sqlite", name)


def _task(row: Sequence[Any]) -> Task:
    """A ``Task`` from a ``select *`` row (columns in the §1.5 order).

    Columns an operator added after the protocol's (allowed: the open-time schema
    check makes sure the protocol's come first, in order) are left out.
    """
    return task_from_values(row[:_TASK_WIDTH])


def _first_task(rows: sync.Rows) -> Task | None:
    return _task(rows[0]) if rows else None


def purge_statement(active: frozenset[str]) -> str:
    """The purge statement for the filters given a value, read in completion order.

    With a queue, ``purge`` (its queue and literal status list seek the partial
    ``(queue, completed_at_ms)`` index); without, ``purge_by_age``, which hides
    the indexes that made the planner sort every candidate (its header says how).
    Either file runs as written.
    """
    return _sql("purge" if "queue" in active else "purge_by_age")


def _claim_statement(variant: str, params: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A claim variant's text, its lists bound as JSON arrays (``json_each``, §2.3)."""
    for name in ("queues", "names"):
        if params.get(name) is not None:
            params[name] = _json.dumps(params[name])
    return _sql(variant), params


class SQLiteOperations(TaskStore):
    """The protocol's statements and transactions over ``SQLiteStore``'s plumbing."""

    # -- plumbing (SQLiteStore) ------------------------------------------------------

    @abc.abstractmethod
    async def _fetch(self, sql: str, params: dict[str, Any]) -> sync.Rows:
        """A read (the reader connection when it can answer at once)."""

    @abc.abstractmethod
    async def _write(self, sql: str, params: dict[str, Any]) -> tuple[int, sync.Rows]:
        """A single-statement write through group commit; ``(now_ms, rows)`` after COMMIT."""

    @abc.abstractmethod
    def _refresh_statistics_if_due(self) -> None:
        """Planner statistics, if due, off the loop (before a claim)."""

    @abc.abstractmethod
    async def _retrying(self, fn: Callable[..., R], *args: Any, commits: bool = True) -> R:
        """``fn(raw, *args)`` on the writer connection, backing off while it is busy."""

    async def _submit(self, new: NewTask) -> SubmitOutcome:
        self._check_writable("submit")
        params = insert_params(new)
        if new.key is None:
            now, _ = await self._write(_sql("insert_task"), params)
            return SubmitOutcome(self._submitted(new, now), "created")
        result = await self._retrying(_keyed_submit, new.key, new.conflict, params)
        if isinstance(result, AlreadyExists):
            raise result
        inserted_at, holder, canceled = result
        if inserted_at is None:
            assert holder is not None
            return SubmitOutcome(_task(holder), "reused")
        task = self._submitted(new, inserted_at)
        if holder is None:
            return SubmitOutcome(task, "created")
        previous = _task(canceled if canceled is not None else holder)
        return SubmitOutcome(task, "replaced", previous, canceled=canceled is not None)

    @staticmethod
    def _submitted(new: NewTask, now: int) -> Task:
        """The inserted row, built from the values bound (no read-back)."""
        row = (
            new.id,
            new.name,
            new.queue,
            "queued",
            _json.loads(new.payload_json),  # the caller's own objects are never handed back
            None,  # result
            None,  # error
            _json.loads(new.metadata_json),
            None,  # progress
            None,  # message
            0,  # attempt
            new.max_attempts,
            new.priority,
            None,  # worker_id
            None,  # lease_until_ms
            now + new.delay_ms,  # run_at_ms
            None,  # cancel_requested_at_ms
            new.parent_id,
            new.root_id,
            new.correlation_id,
            now,  # created_at_ms
            now,  # updated_at_ms
            None,  # completed_at_ms
        )
        return task_from_values(row, decoded_json=True)

    async def _get(self, task_id: str) -> Task | None:
        return _first_task(await self._fetch(_sql("get"), {"id": task_id}))

    async def _get_by_key(self, key: str) -> Task | None:
        return _first_task(await self._fetch(_sql("get_by_key"), {"key": key}))

    async def _get_status(self, task_id: str) -> TaskRef | None:
        rows = await self._fetch(_sql("get_status"), {"id": task_id})
        return TaskRef(rows[0][0], rows[0][1]) if rows else None

    async def _get_status_by_key(self, key: str) -> TaskRef | None:
        rows = await self._fetch(_sql("get_status_by_key"), {"key": key})
        return TaskRef(rows[0][0], rows[0][1]) if rows else None

    async def _list(
        self, filters: dict[str, str | None], limit: int, offset: int
    ) -> builtins.list[Task]:
        rows = await self._fetch(_sql("list"), {**filters, "limit": limit, "offset": offset})
        return [_task(r) for r in rows]

    async def _stats(self, queue: str | None) -> builtins.list[tuple[str, str, int]]:
        rows = await self._fetch(_sql("stats"), {"queue": queue})
        return [(r[0], r[1], r[2]) for r in rows]

    async def _queue_depth(self, queue: str, max_depth: int) -> int:
        rows = await self._fetch(_sql("queue_depth"), {"queue": queue, "max_depth": max_depth})
        return int(rows[0][0])

    async def _cancel(self, task_id: str) -> Task | None:
        self._check_writable("cancel")
        _, rows = await self._write(_sql("cancel"), {"id": task_id})
        return _first_task(rows)

    async def _retry(self, task_id: str, reset_attempt: bool) -> Task | None:
        self._check_writable("retry")
        params = {"id": task_id, "reset_attempt": int(reset_attempt)}
        _, rows = await self._write(_sql("retry"), params)
        return _first_task(rows)

    async def _purge_ids(self, task_ids: builtins.list[str]) -> builtins.list[str]:
        self._check_writable("purge")
        _, rows = await self._write(_sql("purge_ids"), {"ids": _json.dumps(task_ids)})
        return [r[0] for r in rows]

    async def _reschedule(
        self, statement: str, task_id: str, params: dict[str, Any]
    ) -> Task | None:
        self._check_writable(statement)
        _, rows = await self._write(_sql(statement), {"id": task_id, **params})
        return _first_task(rows)

    async def _by_key(self, key: str, name: str, extra: dict[str, Any]) -> Task | None:
        """lock_key, get_key, then one statement on the task, in one transaction."""
        self._check_writable(name)
        rows = await self._retrying(_keyed_update, key, _sql(name), extra)
        return _first_task(rows)

    async def _cancel_by_key(self, key: str) -> Task | None:
        return await self._by_key(key, "cancel", {})

    async def _retry_by_key(self, key: str, reset_attempt: bool) -> Task | None:
        return await self._by_key(key, "retry", {"reset_attempt": int(reset_attempt)})

    async def _purge(
        self, older_than_ms: int, filters: dict[str, str | None], limit: int
    ) -> builtins.list[str]:
        self._check_writable("purge")
        sql = purge_statement(frozenset(k for k, v in filters.items() if v is not None))
        params = {**filters, "older_than_ms": older_than_ms, "limit": limit}
        _, rows = await self._write(sql, params)
        return [r[0] for r in rows]

    async def _probe(self, queues: builtins.list[str], names: builtins.list[str] | None) -> bool:
        params = {
            "queues": _json.dumps(queues),
            "names": None if names is None else _json.dumps(names),
            "now_ms": now_ms(),
        }
        rows = await self._fetch(_sql("claimable_probe"), params)
        return bool(rows and rows[0][0])

    def _announce_recovered(self, rows: sync.Rows) -> None:
        for row in rows:
            self._after_write(_task(row))

    async def claim(
        self,
        *,
        queues: Sequence[str],
        worker_id: str,
        lease_ms: int = 30_000,
        limit: int = 1,
        names: Sequence[str] | None = None,
    ) -> builtins.list[Task]:
        """A claim session with one draw (§4.14), run as one writer-thread call.

        Returns the claimed tasks in claim order; empty when the probe found
        nothing, ``limit == 0`` or ``names == []``.

        Raises:
            ValueError: as ``TaskStore.claim`` (a negative limit included).
        """
        args = self._check_claim(queues, worker_id, lease_ms, names)
        self.signals.claiming(args.queues)
        draw = self._draw_variant(args.queues, args.names, limit)
        if draw is None:
            return []
        self._check_writable("claim")
        if not await self._probe(args.queues, args.names):
            return []
        sql, params = _claim_statement(*draw)
        params.update(worker_id=args.worker_id, lease_ms=args.lease_ms)
        steps = [
            (_sql("recover_leases"), {"lease_expired_error": LEASE_EXPIRED_JSON}),
            (sql, params),
        ]
        self._refresh_statistics_if_due()
        recovered, claimed = await self._retrying(sync.transaction, steps)
        self._announce_recovered(recovered)
        tasks = in_claim_order(_task(r) for r in claimed)
        set_aside = [task for task in tasks if undecodable(task)]
        if not set_aside:
            return tasks
        # Never handed out: failed for good, and the shortfall claimed again.
        await self._fail_undecodable(set_aside)
        kept = [task for task in tasks if not undecodable(task)]
        if len(tasks) == limit:
            kept += await self.claim(
                queues=args.queues,
                worker_id=args.worker_id,
                lease_ms=args.lease_ms,
                limit=len(set_aside),
                names=args.names,
            )
        return kept

    async def _owned(self, name: str, task_id: str, worker_id: str, extra: dict[str, Any]) -> Task:
        """An ownership-checked single-statement write; no row means ``LostLease``."""
        self._check_writable(name)
        _, rows = await self._write(_sql(name), {"id": task_id, "worker_id": worker_id, **extra})
        if not rows:
            raise LostLease(task_id)
        return _task(rows[0])

    async def _heartbeat(self, task_id: str, worker_id: str, lease_ms: int) -> Task:
        return await self._owned("heartbeat", task_id, worker_id, {"lease_ms": lease_ms})

    async def _heartbeat_batch(
        self, task_ids: builtins.list[str], worker_id: str, lease_ms: int
    ) -> dict[str, bool]:
        self._check_writable("heartbeat_batch")
        params = {"ids": _json.dumps(task_ids), "worker_id": worker_id, "lease_ms": lease_ms}
        _, rows = await self._write(_sql("heartbeat_batch"), params)
        return {row[0]: row[1] is not None for row in rows}

    async def _progress(
        self, task_id: str, worker_id: str, progress: float | None, message: str | None
    ) -> Task:
        extra = {"progress": progress, "message": message}
        return await self._owned("progress", task_id, worker_id, extra)

    async def _succeed(self, task_id: str, worker_id: str, result_json: str | None) -> Task:
        return await self._owned(
            "succeed", task_id, worker_id, {"result": result_json, "message": None}
        )

    async def _complete(self, task_id: str, worker_id: str, result_json: str | None) -> Task:
        return await self._owned("complete", task_id, worker_id, {"result": result_json})

    async def _complete_many(self, task_ids: builtins.list[str], worker_id: str) -> set[str]:
        self._check_writable("complete_many")
        params = {"ids": _json.dumps(task_ids), "worker_id": worker_id}
        _, rows = await self._write(_sql("complete_many"), params)
        return {row[0] for row in rows}

    async def _fail(
        self, task_id: str, worker_id: str, error_json: str, retryable: bool, delay_ms: int
    ) -> Task:
        extra = {"error": error_json, "retryable": int(retryable), "delay_ms": delay_ms}
        return await self._owned("fail", task_id, worker_id, extra)


def _keyed_submit(
    raw: sqlite3.Connection, key: str, conflict: str, params: dict[str, Any]
) -> tuple[int | None, tuple[Any, ...] | None, tuple[Any, ...] | None] | AlreadyExists:
    """§4.3 in one ``BEGIN IMMEDIATE``, deciding by ``keyed_choice``.

    Returns ``(now_ms, holder, canceled)``: ``now_ms`` None when the key's task
    (``holder``) is handed back, else the insert's clock, with the key's
    previous holder (None if it was free) and that holder as the cancel left
    it (None if not canceled); or an ``AlreadyExists`` for ``reject``
    (rolled back).
    """
    sync.begin(raw)
    try:
        now = now_ms()
        key_params = {"key": key, "now_ms": now}
        raw.execute(_sql("lock_key"), key_params).fetchall()
        pointer = raw.execute(_sql("get_key"), key_params).fetchone()
        holder = None
        if pointer is not None:
            # Re-read inside the transaction: a purge may have removed the task.
            holder = raw.execute(_sql("get"), {"id": pointer[0]}).fetchone()
        choice = keyed_choice(conflict, None if holder is None else holder[3])
        if choice == "reject":
            assert holder is not None
            sync.rollback(raw)
            return AlreadyExists(key, holder[0], holder[3])
        if choice == "reuse":
            sync.commit(raw)
            return (None, holder, None)
        canceled = None
        if choice == "cancel-and-insert":
            assert holder is not None
            rows = raw.execute(_sql("cancel"), {"id": holder[0], "now_ms": now}).fetchall()
            canceled = rows[0] if rows else None
        sync.stamp(params, now)
        raw.execute(_sql("insert_task"), params).fetchall()
        raw.execute(
            _sql("upsert_key"), {"key": key, "task_id": params["id"], "now_ms": now}
        ).fetchall()
        sync.commit(raw)
    except BaseException:
        sync.rollback(raw)
        raise
    return (now, holder, canceled)


def _keyed_update(raw: sqlite3.Connection, key: str, sql: str, extra: dict[str, Any]) -> sync.Rows:
    """``cancel_by_key`` / ``retry_by_key``: lock_key, get_key, the statement."""
    sync.begin(raw)
    try:
        now = now_ms()
        raw.execute(_sql("lock_key"), {"key": key}).fetchall()
        pointer = raw.execute(_sql("get_key"), {"key": key}).fetchone()
        rows: sync.Rows = []
        if pointer is not None:
            rows = raw.execute(sql, {"id": pointer[0], "now_ms": now, **extra}).fetchall()
        sync.commit(raw)
    except BaseException:
        sync.rollback(raw)
        raise
    return rows


def settle_statement(settle: OwnedSettle) -> tuple[str, dict[str, Any]]:
    """The ``complete`` / ``fail`` statement and its parameters for one riding settlement."""
    params: dict[str, Any] = {"id": settle.task_id, "worker_id": settle.worker_id}
    if settle.kind == "complete":
        params["result"] = settle.value_json
    else:
        params.update(
            error=settle.value_json, retryable=int(settle.retryable), delay_ms=settle.delay_ms
        )
    return _sql(settle.kind), params
