"""The Postgres store's protocol operations: each one statement or one transaction.

``PostgresOperations`` implements ``TaskStore``'s primitives on top of the
plumbing ``PostgresStore`` provides (``_run`` on a pooled connection, the write
group, row decoding): submits and keyed submits, reads, cancel / retry / purge,
claim sessions and the completing claim, and the owned writes. The connection
machinery (pool, lifecycle, schema work) stays in ``postgres.py``.
"""

from __future__ import annotations

import abc
import builtins
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import psycopg

from engine import _rules
from engine._errors import AlreadyExists, LostLease
from engine._models import SubmitOutcome, Task, TaskRef, in_claim_order
from engine.store._base import (
    LEASE_EXPIRED_JSON,
    ClaimArgs,
    CompletingClaim,
    NewTask,
    OwnedSettle,
    Plan,
    SettleOutcome,
    TaskStore,
    insert_params,
    keyed_choice,
)
from engine.store._pg_group import lost
from engine.store._pg_statements import _sql, prepare_for

T = TypeVar("T")
Conn = psycopg.AsyncConnection[dict[str, Any]]

# Transaction control for pipelines that commit before their last result is read.
_BEGIN = "begin isolation level read committed"
_COMMIT = "commit"
_ROLLBACK = "rollback"


class PostgresOperations(TaskStore):
    """The protocol's statements and transactions over ``PostgresStore``'s plumbing."""

    # -- plumbing (PostgresStore) --------------------------------------------------

    @abc.abstractmethod
    async def _run(
        self, work: Callable[[Conn], Awaitable[T]], *, write: bool, retry: bool = False
    ) -> T:
        """Run ``work`` on a pooled connection (connection loss: ``StoreUnavailable``)."""

    @abc.abstractmethod
    async def _grouped(
        self, name: str | None, params: Mapping[str, Any], order: str
    ) -> Task | None:
        """A single-row write through the write group; ``name`` None = insert_task."""

    @abc.abstractmethod
    def _task(self, row: Mapping[str, Any]) -> Task:
        """A ``Task`` from a row as this store's connections return it."""

    @abc.abstractmethod
    def _task_cursor(self, conn: Conn) -> Any:
        """A cursor on ``conn`` whose full task rows come back as ``Task``s, built
        by position (no dict per row), or None where the table's columns are not
        in protocol order (rows then come back as dicts: ``_task``)."""

    @abc.abstractmethod
    async def _one(
        self, name: str, params: Mapping[str, Any], *, write: bool, retry: bool = False
    ) -> Task | None:
        """One statement returning at most one task row."""

    async def _owned(self, name: str, task_id: str, params: Mapping[str, Any]) -> Task:
        """An ownership-checked write (group-committed): the row, or LostLease."""
        task = await self._grouped(name, {"id": task_id, **params}, task_id)
        if task is None:
            raise LostLease(task_id)
        return task

    # -- submit --------------------------------------------------------------------

    async def _submit(self, new: NewTask) -> SubmitOutcome:
        params = insert_params(new)
        if new.key is None:
            task = await self._grouped(None, params, new.id)
            assert task is not None  # insert ... returning always yields the row
            return SubmitOutcome(task, "created")
        key = new.key

        async def keyed(conn: Conn) -> SubmitOutcome:
            canceling = inserting = None
            # Pipelined: BEGIN, lock_key and the lookup go out in one round trip,
            # the writes and COMMIT in a second.
            async with conn.pipeline(), conn.transaction():
                await conn.execute(_sql("lock_key"), {"key": key})
                # get_key + get in one statement: a pointer to a purged task
                # reads as no row, i.e. a free key (§4.3 step 5).
                row = await (await conn.execute(_sql("get_by_key"), {"key": key})).fetchone()
                holder = None if row is None else self._task(row)
                choice = keyed_choice(new.conflict, None if holder is None else holder.status)
                if choice == "reject":
                    assert holder is not None
                    raise AlreadyExists(key, holder.id, holder.status)
                if choice != "reuse":
                    if choice == "cancel-and-insert":
                        assert holder is not None
                        canceling = await conn.execute(_sql("cancel"), {"id": holder.id})
                    inserting = await conn.execute(_sql("insert_task"), params)
                    await conn.execute(_sql("upsert_key"), {"key": key, "task_id": new.id})
            if inserting is None:
                assert holder is not None
                return SubmitOutcome(holder, "reused")
            inserted = await inserting.fetchone()
            assert inserted is not None  # insert ... returning always yields the row
            task = self._task(inserted)
            if holder is None:
                return SubmitOutcome(task, "created")
            canceled = None if canceling is None else await canceling.fetchone()
            if canceled is None:
                return SubmitOutcome(task, "replaced", holder)
            return SubmitOutcome(task, "replaced", self._task(canceled), canceled=True)

        return await self._run(keyed, write=True)

    # -- reads ---------------------------------------------------------------------

    async def _get(self, task_id: str) -> Task | None:
        return await self._one("get", {"id": task_id}, write=False, retry=True)

    async def _get_by_key(self, key: str) -> Task | None:
        return await self._one("get_by_key", {"key": key}, write=False, retry=True)

    async def _ref(self, name: str, params: Mapping[str, Any]) -> TaskRef | None:
        async def work(conn: Conn) -> dict[str, Any] | None:
            return await (await conn.execute(_sql(name), params)).fetchone()

        row = await self._run(work, write=False, retry=True)
        return None if row is None else TaskRef(row["id"], row["status"])

    async def _get_status(self, task_id: str) -> TaskRef | None:
        return await self._ref("get_status", {"id": task_id})

    async def _get_status_by_key(self, key: str) -> TaskRef | None:
        return await self._ref("get_status_by_key", {"key": key})

    async def _fetch_all(
        self,
        name: str,
        params: Mapping[str, Any],
        *,
        jit: bool = True,
    ) -> builtins.list[dict[str, Any]]:
        sql, prepare = _sql(name), prepare_for(name)

        async def work(conn: Conn) -> builtins.list[dict[str, Any]]:
            if jit:
                return await (await conn.execute(sql, params, prepare=prepare)).fetchall()
            async with conn.transaction():
                await conn.execute("set local jit = off")
                return await (await conn.execute(sql, params, prepare=prepare)).fetchall()

        return await self._run(work, write=False, retry=True)

    async def _list(
        self, filters: dict[str, str | None], limit: int, offset: int
    ) -> builtins.list[Task]:
        rows = await self._fetch_all("list", {**filters, "limit": limit, "offset": offset})
        return [self._task(r) for r in rows]

    async def _stats(self, queue: str | None) -> builtins.list[tuple[str, str, int]]:
        rows = await self._fetch_all("stats", {"queue": queue})
        return [(r["queue"], r["status"], int(r["count"])) for r in rows]

    async def _queue_depth(self, queue: str, max_depth: int) -> int:
        rows = await self._fetch_all("queue_depth", {"queue": queue, "max_depth": max_depth})
        return int(rows[0]["headroom"])

    # -- cancel / retry / purge ---------------------------------------------------------

    async def _cancel(self, task_id: str) -> Task | None:
        return await self._one("cancel", {"id": task_id}, write=True)

    async def _retry(self, task_id: str, reset_attempt: bool) -> Task | None:
        return await self._one("retry", {"id": task_id, "reset_attempt": reset_attempt}, write=True)

    async def _reschedule(
        self, statement: str, task_id: str, params: dict[str, Any]
    ) -> Task | None:
        return await self._one(statement, {"id": task_id, **params}, write=True)

    async def _purge_ids(self, task_ids: builtins.list[str]) -> builtins.list[str]:
        async def work(conn: Conn) -> builtins.list[dict[str, Any]]:
            return await (await conn.execute(_sql("purge_ids"), {"ids": task_ids})).fetchall()

        return [r["id"] for r in await self._run(work, write=True)]

    async def _by_key(self, key: str, name: str, params: Mapping[str, Any]) -> Task | None:
        """lock_key, get_key, then ``name`` on the task the key points at."""

        async def work(conn: Conn) -> Task | None:
            async with conn.pipeline(), conn.transaction():
                await conn.execute(_sql("lock_key"), {"key": key})
                pointer = await (await conn.execute(_sql("get_key"), {"key": key})).fetchone()
                if pointer is None:
                    return None
                cur = await conn.execute(_sql(name), {"id": pointer["task_id"], **params})
            row = await cur.fetchone()
            return None if row is None else self._task(row)

        return await self._run(work, write=True)

    async def _cancel_by_key(self, key: str) -> Task | None:
        return await self._by_key(key, "cancel", {})

    async def _retry_by_key(self, key: str, reset_attempt: bool) -> Task | None:
        return await self._by_key(key, "retry", {"reset_attempt": reset_attempt})

    async def _purge(
        self, older_than_ms: int, filters: dict[str, str | None], limit: int
    ) -> builtins.list[str]:
        params = {**filters, "older_than_ms": older_than_ms, "limit": limit}
        # Each walks its own completion index (the partial queue one for a queue).
        name = "purge_in_queue" if filters.get("queue") is not None else "purge"
        sql, prepare = _sql(name), prepare_for(name)

        async def work(conn: Conn) -> builtins.list[dict[str, Any]]:
            return await (await conn.execute(sql, params, prepare=prepare)).fetchall()

        rows = await self._run(work, write=True)
        return [r["id"] for r in rows]

    # -- claims ----------------------------------------------------------------------

    def _draw_statement(
        self,
        queues: builtins.list[str],
        worker_id: str,
        lease_ms: int,
        draw_names: Any,
        limit: int,
    ) -> tuple[str, dict[str, Any]] | None:
        """The claim variant (§4.13) and its parameters for one draw; None = no statement."""
        variant = self._draw_variant(queues, draw_names, limit)
        if variant is None:
            return None
        name, params = variant
        params.update(worker_id=worker_id, lease_ms=lease_ms)
        return _sql(name), params

    async def _claim_session(
        self, args: ClaimArgs, plan: Plan[T], *, probe: bool
    ) -> tuple[T, builtins.list[Task]] | None:
        return await self._claim_session_on(args, plan, probe, single_draw=False)

    async def _claim_session_one_draw(
        self, args: ClaimArgs, plan: Plan[T], *, probe: bool
    ) -> tuple[T, builtins.list[Task]] | None:
        return await self._claim_session_on(args, plan, probe, single_draw=True)

    async def _claim_session_on(
        self, args: ClaimArgs, plan: Plan[T], probe: bool, *, single_draw: bool
    ) -> tuple[T, builtins.list[Task]] | None:
        """The probe (when ``probe``), then one pipelined transaction.

        BEGIN and recovery travel with the first draw; with ``single_draw`` the
        COMMIT travels with it too (one round trip), else it follows the plan.
        Raises ``StoreUnavailable`` if the connection is lost (whether the
        COMMIT landed is then unknown). A plan raising after a single draw's
        COMMIT leaves its rows claimed: they return through lease recovery.
        """

        async def session(conn: Conn) -> tuple[T, builtins.list[Task]] | None:
            if probe and not await self._probe_on(conn, args.queues, args.names):
                return None
            committed = False
            try:
                async with conn.pipeline():
                    await conn.execute(_BEGIN)
                    recovering = await conn.execute(
                        _sql("recover_leases"), {"lease_expired_error": LEASE_EXPIRED_JSON}
                    )

                    async def draw(draw_names: Any, limit: int) -> builtins.list[Task]:
                        nonlocal committed
                        if committed:
                            raise RuntimeError("a single_draw plan drew more than once")
                        stmt = self._draw_statement(
                            args.queues, args.worker_id, args.lease_ms, draw_names, limit
                        )
                        if stmt is None:
                            return []
                        cur = await conn.execute(*stmt)
                        if single_draw:
                            await conn.execute(_COMMIT)
                            committed = True
                        rows = await cur.fetchall()  # syncs: the COMMIT's outcome too
                        return in_claim_order(self._task(r) for r in rows)

                    value = await plan(draw)
                    if not committed:
                        await conn.execute(_COMMIT)
                        committed = True
            except Exception as exc:
                if not lost(conn, exc):
                    # Nothing committed, or the COMMIT failed: close what is open.
                    await _abort(conn)
                raise
            return value, [self._task(r) for r in await recovering.fetchall()]

        return await self._run(session, write=True)

    async def _probe(self, queues: builtins.list[str], names: builtins.list[str] | None) -> bool:
        async def work(conn: Conn) -> bool:
            return await self._probe_on(conn, queues, names)

        return await self._run(work, write=False, retry=True)

    @staticmethod
    async def _probe_on(
        conn: Conn, queues: builtins.list[str], names: builtins.list[str] | None
    ) -> bool:
        cur = await conn.execute(_sql("claimable_probe"), {"queues": queues, "names": names})
        probe = await cur.fetchone()
        return probe is not None and bool(probe["has_work"])

    async def _completing_claim(
        self,
        ids: builtins.list[str],
        args: ClaimArgs,
        plan: Plan[T],
        settles: builtins.list[OwnedSettle],
    ) -> CompletingClaim[T] | Exception:
        return await self._completing_claim_on(ids, args, plan, settles, single_draw=False)

    async def _completing_claim_one_draw(
        self,
        ids: builtins.list[str],
        args: ClaimArgs,
        plan: Plan[T],
        settles: builtins.list[OwnedSettle],
    ) -> CompletingClaim[T] | Exception:
        return await self._completing_claim_on(ids, args, plan, settles, single_draw=True)

    async def _completing_claim_on(
        self,
        ids: builtins.list[str],
        args: ClaimArgs,
        plan: Plan[T],
        settles: builtins.list[OwnedSettle],
        *,
        single_draw: bool,
    ) -> CompletingClaim[T] | Exception:
        """One pipelined transaction: complete, settle, recover, ``plan``, COMMIT (see the base).

        With ``single_draw`` the COMMIT travels with the draw's statement.
        Raises ``StoreUnavailable`` if the connection is lost (whether the
        COMMIT landed is then unknown, exactly as for a lone write).
        """
        complete_params = {"ids": ids, "worker_id": args.worker_id}
        settle_params = [(_sql(s.kind), self._settle_params(s)) for s in settles]

        async def session(conn: Conn) -> CompletingClaim[T] | Exception:
            committed = confirmed = False
            completing = recovering = None
            settling = []
            try:
                async with conn.pipeline():
                    await conn.execute(_BEGIN)
                    if ids:
                        completing = await conn.execute(_sql("complete_many"), complete_params)
                    for sql, params in settle_params:
                        settling.append(await conn.execute(sql, params))
                    recovering = await conn.execute(
                        _sql("recover_leases"), {"lease_expired_error": LEASE_EXPIRED_JSON}
                    )

                    async def draw(draw_names: Any, limit: int) -> builtins.list[Task]:
                        nonlocal committed, confirmed
                        if committed:
                            raise RuntimeError("a single_draw plan drew more than once")
                        stmt = self._draw_statement(
                            args.queues, args.worker_id, args.lease_ms, draw_names, limit
                        )
                        if stmt is None:
                            return []
                        cur = self._task_cursor(conn)
                        if cur is None:
                            cur = await conn.execute(*stmt)
                        else:
                            await cur.execute(*stmt)
                        if single_draw:
                            await conn.execute(_COMMIT)
                            committed = True
                        rows = await cur.fetchall()  # syncs: the COMMIT's outcome too
                        confirmed = committed
                        return in_claim_order(
                            r if isinstance(r, Task) else self._task(r) for r in rows
                        )

                    value = await plan(draw)
                    if not committed:
                        await conn.execute(_COMMIT)
                        committed = True
                confirmed = True
            except Exception as exc:
                if lost(conn, exc):
                    raise
                if not confirmed:
                    # Nothing of the transaction was committed: close it.
                    await _abort(conn)
                    return exc
                # Committed, then the plan raised: the completions are durable;
                # the claimed rows go back through lease recovery.
                claim_error: Exception | None = exc
                value = None
            else:
                claim_error = None
            settled = (
                set() if completing is None else {r["id"] for r in await completing.fetchall()}
            )
            recovered = [] if recovering is None else await recovering.fetchall()
            written: dict[str, SettleOutcome] = {}
            for settle, cur in zip(settles, settling, strict=True):
                row = await cur.fetchone()
                written[settle.task_id] = None if row is None else self._task(row)
            return CompletingClaim(
                settled, value, claim_error, [self._task(r) for r in recovered], written
            )

        return await self._run(session, write=True)

    # -- owned writes ------------------------------------------------------------------

    async def _heartbeat(self, task_id: str, worker_id: str, lease_ms: int) -> Task:
        return await self._owned(
            "heartbeat", task_id, {"worker_id": worker_id, "lease_ms": lease_ms}
        )

    async def _heartbeat_batch(
        self, task_ids: builtins.list[str], worker_id: str, lease_ms: int
    ) -> dict[str, bool]:
        params = {"ids": task_ids, "worker_id": worker_id, "lease_ms": lease_ms}

        async def work(conn: Conn) -> builtins.list[dict[str, Any]]:
            return await (await conn.execute(_sql("heartbeat_batch"), params)).fetchall()

        rows = await self._run(work, write=True)
        return {r["id"]: r["cancel_requested_at_ms"] is not None for r in rows}

    async def _progress(
        self, task_id: str, worker_id: str, progress: float | None, message: str | None
    ) -> Task:
        params = {"worker_id": worker_id, "progress": progress, "message": message}
        return await self._owned("progress", task_id, params)

    async def _succeed(self, task_id: str, worker_id: str, result_json: str | None) -> Task:
        return await self._owned("succeed", task_id, self._result_params(worker_id, result_json))

    async def _complete(self, task_id: str, worker_id: str, result_json: str | None) -> Task:
        return await self._owned("complete", task_id, self._result_params(worker_id, result_json))

    async def _complete_many(self, task_ids: builtins.list[str], worker_id: str) -> set[str]:
        params = {"ids": task_ids, "worker_id": worker_id}

        async def work(conn: Conn) -> builtins.list[dict[str, Any]]:
            return await (await conn.execute(_sql("complete_many"), params)).fetchall()

        return {row["id"] for row in await self._run(work, write=True)}

    @staticmethod
    def _result_params(worker_id: str, result_json: str | None) -> dict[str, Any]:
        return {
            "worker_id": worker_id,
            "result": result_json,
            "message": None,
        }

    async def _fail(
        self, task_id: str, worker_id: str, error_json: str, retryable: bool, delay_ms: int
    ) -> Task:
        return await self._owned(
            "fail", task_id, self._fail_params(worker_id, error_json, retryable, delay_ms)
        )

    @staticmethod
    def _fail_params(
        worker_id: str, error_json: str, retryable: bool, delay_ms: int
    ) -> dict[str, Any]:
        # Recording a failure must not itself fail (§2.6): a NUL jsonb would
        # refuse is replaced rather than rejected.
        safe_error = _rules.NUL_ESCAPE.sub(lambda m: m.group(0)[:-6] + "\\ufffd", error_json)
        return {
            "worker_id": worker_id,
            "error": safe_error,
            "retryable": retryable,
            "delay_ms": delay_ms,
        }

    def _settle_params(self, settle: OwnedSettle) -> dict[str, Any]:
        """The ``complete`` / ``fail`` statement's parameters for one riding settlement."""
        if settle.kind == "complete":
            params = self._result_params(settle.worker_id, settle.value_json)
        else:
            assert settle.value_json is not None
            params = self._fail_params(
                settle.worker_id, settle.value_json, settle.retryable, settle.delay_ms
            )
        return {"id": settle.task_id, **params}

    # -- transactional completion ---------------------------------------------------------

    async def _owned_in(
        self,
        name: str,
        task_id: str,
        worker_id: str,
        result: Any,
        write: Callable[[Any], Awaitable[Any]],
    ) -> Task:
        task_id, worker_id = self._owned_ids(task_id, worker_id)
        params = {"id": task_id, **self._result_params(worker_id, self._result_json(result))}

        async def work(conn: Conn) -> Task:
            async with conn.transaction():
                # The caller's write first, then the settle: if the lease is gone
                # the whole transaction, the caller's write included, rolls back.
                value = await write(conn)
                settle = params
                if result is None and value is not None:
                    # As in cairnq's succeed_in: what write returns is the result.
                    encoded = self._result_json(value)
                    settle = {"id": task_id, **self._result_params(worker_id, encoded)}
                row = await (await conn.execute(_sql(name), settle)).fetchone()
                if row is None:
                    raise LostLease(task_id)
            return self._task(row)

        task = await self._run(work, write=True)
        self._after_write(task)
        return task


async def _abort(conn: Conn) -> None:
    """Roll back whatever transaction a failed pipeline left open (if any)."""
    if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        await conn.execute(_ROLLBACK)
