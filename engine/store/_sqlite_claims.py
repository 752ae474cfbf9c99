"""The SQLite store's claim sessions: a transaction held across draws, or one job.

A claim session's transaction is the write lock, held from its BEGIN to its
COMMIT, so both shapes keep it as short as they can:

* **A plan that draws once** (every worker with one source: the usual case;
  ``single_draw``): the draw sends the whole transaction, BEGIN, the
  settlements riding along, lease recovery, the claim, COMMIT, as one job
  (``settle_and_claim``) to where its COMMIT runs: under
  ``synchronous=FULL`` the writer thread, so the statements no longer hold the
  loop and run beside their own fsync, and the loop hands the transaction
  over once. Inline on the loop when nothing fsyncs.
* **A plan that draws several times** (several sources, quotas between
  them): BEGIN and the statements run inline on the caller's loop (no fsync
  there; ``busy_timeout`` 0, so nothing waits inside SQLite), the plan's
  Python between the draws, then the COMMIT hops to the writer thread.
"""

from __future__ import annotations

import abc
import builtins
import contextlib
import sqlite3
from collections.abc import Sequence
from typing import Any, TypeVar, cast

from engine import _json
from engine._models import Task, in_claim_order
from engine.store import _sqlite_sync as sync
from engine.store._base import (
    LEASE_EXPIRED_JSON,
    ClaimArgs,
    CompletingClaim,
    OwnedSettle,
    Plan,
    SettleOutcome,
)
from engine.store._faults import sqlite_fault
from engine.store._sqlite_operations import (
    SQLiteOperations,
    _claim_statement,
    _sql,
    _task,
    settle_statement,
)
from engine.store._sqlite_writer import SQLiteWriter, yield_loop

T = TypeVar("T")


#: What ``settle_and_claim`` committed: each settlement's rows, the recovered, the claimed.
Settled = tuple[list[sync.Rows], sync.Rows, sync.Rows]


def settle_and_claim(
    conn: sqlite3.Connection,
    settles: Sequence[tuple[str, dict[str, Any]]],
    recover: tuple[str, dict[str, Any]],
    claim: tuple[str, dict[str, Any]] | None,
) -> tuple[Settled | None, Exception | None]:
    """A single-draw claim's whole transaction: BEGIN, ``settles``, ``recover``, ``claim``, COMMIT.

    One job: under ``synchronous=FULL`` the writer thread runs the statements
    where it then fsyncs their COMMIT, and the loop hands the transaction over
    once. ``Busy`` when BEGIN was refused (nothing done). Any other error rolls
    everything back and is returned as ``(None, error)``, not raised (a raised
    one would travel back from the writer thread as the job's failure), so the
    caller can tell it from ``Busy`` and write the settlements on their own.
    """
    sync.begin(conn)
    try:
        settled = [sync.run(conn, *settle) for settle in settles]
        recovered = sync.run(conn, *recover)
        claimed = [] if claim is None else sync.run(conn, *claim)
        sync.commit(conn)
    except Exception as exc:
        sync.rollback(conn)
        return None, exc
    except BaseException:
        sync.rollback(conn)
        raise
    return (settled, recovered, claimed), None


def _settling(
    ids: builtins.list[str], worker_id: str, settles: builtins.list[OwnedSettle]
) -> builtins.list[tuple[str, dict[str, Any]]]:
    """A completing claim's writes: ``complete_many(ids)``, then each settlement."""
    many = {"ids": _json.dumps(ids), "worker_id": worker_id}
    return [(_sql("complete_many"), many), *(settle_statement(s) for s in settles)]


def _completed(
    settles: builtins.list[OwnedSettle],
    rows: builtins.list[sync.Rows],
    recovered: sync.Rows,
    value: T | None,
    claim_error: Exception | None,
) -> CompletingClaim[T]:
    """A completing claim's outcome from its writes' rows (``_settling``'s order)."""
    settled_rows, *settle_rows = rows
    written: dict[str, SettleOutcome] = {
        s.task_id: _task(each[0]) if each else None
        for s, each in zip(settles, settle_rows, strict=True)
    }
    settled = {row[0] for row in settled_rows}
    return CompletingClaim(settled, value, claim_error, [_task(r) for r in recovered], written)


class SQLiteClaims(SQLiteOperations):
    """Claim sessions over ``SQLiteStore``'s writer (a base of it)."""

    _writer: SQLiteWriter
    _path: str
    _busy_timeout_ms: int

    @abc.abstractmethod
    async def _ready(self) -> sqlite3.Connection:
        """The writer connection, opened (and migrated) on first use."""

    @abc.abstractmethod
    def _faults(self) -> contextlib.AbstractContextManager[None]:
        """Storage faults raised inside as engine errors."""

    async def _worth_a_session(self, args: ClaimArgs, probe: bool) -> bool:
        """The store takes writes and, when ``probe``, something is claimable now."""
        self._check_writable("claim_session")
        return not probe or await self._probe(args.queues, args.names)

    async def _claim_session(
        self, args: ClaimArgs, plan: Plan[T], *, probe: bool
    ) -> tuple[T, builtins.list[Task]] | None:
        # Probed after signals too (no signalled_claims_skip_probe): the probe is
        # a read of microseconds here, and the wakes include every commit on the
        # file (heartbeats too). Several draws: inline, then the COMMIT's hop.
        if not await self._worth_a_session(args, probe):
            return None
        await self._ready()
        with self._writer.in_flight():
            return await self._run_session(args.queues, args.worker_id, args.lease_ms, plan)

    async def _run_session(
        self,
        queues: builtins.list[str],
        worker_id: str,
        lease_ms: int,
        plan: Plan[T],
    ) -> tuple[T, builtins.list[Task]]:
        recover = _sql("recover_leases")
        recover_params = {"lease_expired_error": LEASE_EXPIRED_JSON}
        with self._faults():
            recovered = await self._writer.begin_session(
                lambda raw: sync.begin_with(raw, recover, recover_params)
            )
        try:
            with self._faults():
                value = await self._plan_and_commit(queues, worker_id, lease_ms, plan)
        finally:
            self._writer.end_session()
        await yield_loop()
        return value, [_task(row) for row in recovered]

    async def _plan_and_commit(
        self,
        queues: builtins.list[str],
        worker_id: str,
        lease_ms: int,
        plan: Plan[T],
    ) -> T:
        """Run ``plan`` in the open session transaction, then COMMIT and let go.

        Whatever happens, the connection is released with no transaction open
        (the session lock stays the caller's). A failed plan or COMMIT rolls
        everything back and raises.
        """
        raw = self._writer.raw
        assert raw is not None

        async def draw(draw_names: Sequence[str] | None, limit: int) -> builtins.list[Task]:
            variant = self._draw_variant(queues, draw_names, limit)
            if variant is None:
                return []
            sql, params = _claim_statement(*variant)
            params.update(worker_id=worker_id, lease_ms=lease_ms)
            return in_claim_order(_task(r) for r in sync.run(raw, sql, params))

        try:
            value = await plan(draw)
        except BaseException:
            # Even a cancelled session leaves no transaction open.
            self._writer.abort_session()
            raise
        await self._writer.commit_session()
        return value

    async def _completing_claim(
        self,
        ids: builtins.list[str],
        args: ClaimArgs,
        plan: Plan[T],
        settles: builtins.list[OwnedSettle],
    ) -> CompletingClaim[T] | Exception:
        """One ``BEGIN IMMEDIATE``: complete, settle, recover, ``plan``, COMMIT (see the base).

        Raises ``StoreLocked`` if the database stayed locked for ``busy_timeout_ms``.
        """
        await self._ready()
        writes = _settling(ids, args.worker_id, settles)
        recover = (_sql("recover_leases"), {"lease_expired_error": LEASE_EXPIRED_JSON})
        with self._writer.in_flight():
            with self._faults():
                started = await self._writer.begin_session(
                    lambda raw: sync.begin_settling(raw, writes, recover)
                )
            value: T | None = None
            try:
                if isinstance(started, Exception):
                    # The statements were rolled back with their transaction.
                    self._writer.release()
                    return started
                try:
                    with self._faults():
                        value = await self._plan_and_commit(
                            args.queues, args.worker_id, args.lease_ms, plan
                        )
                except Exception as exc:
                    return exc
            finally:
                self._writer.end_session()
        await yield_loop()
        return _completed(settles, started[0], started[1], value, None)

    # -- single-draw claims: the transaction in one job ---------------------------------

    async def _claim_session_one_draw(
        self, args: ClaimArgs, plan: Plan[T], *, probe: bool
    ) -> tuple[T, builtins.list[Task]] | None:
        """``_claim_session`` for a plan that draws once (see ``_one_draw``)."""
        if not await self._worth_a_session(args, probe):
            return None
        drawn = await self._one_draw([], args, plan)
        if isinstance(drawn, Exception):
            raise drawn
        value, plan_error, (_, recovered, _) = drawn
        if plan_error is not None:
            raise plan_error
        return cast(T, value), [_task(r) for r in recovered]

    async def _completing_claim_one_draw(
        self,
        ids: builtins.list[str],
        args: ClaimArgs,
        plan: Plan[T],
        settles: builtins.list[OwnedSettle],
    ) -> CompletingClaim[T] | Exception:
        """``_completing_claim`` for a plan that draws at most once (see ``_one_draw``)."""
        drawn = await self._one_draw(_settling(ids, args.worker_id, settles), args, plan)
        if isinstance(drawn, Exception):
            return drawn
        value, plan_error, (rows, recovered, _) = drawn
        return _completed(settles, rows, recovered, value, plan_error)

    async def _one_draw(
        self,
        writes: builtins.list[tuple[str, dict[str, Any]]],
        args: ClaimArgs,
        plan: Plan[T],
    ) -> tuple[T | None, Exception | None, Settled] | Exception:
        """BEGIN, ``writes``, lease recovery, the plan's one draw, COMMIT: one job.

        The draw sends the whole transaction (``settle_and_claim``) where
        its COMMIT runs: under ``synchronous=FULL`` the writer thread, so the
        statements no longer hold the loop (inline, a cycle's statements cost
        the loop ~0.3 ms at concurrency 8, ~10 ms at batch=64) and run beside
        their fsync; the loop hands over once and waits. A plan that never
        draws still has its ``writes`` and recovery committed, after it.

        Returns the plan's value, the error the plan raised after the COMMIT
        (its claimed rows then come back through lease recovery) and what
        the job committed; or the error that rolled everything back (a
        statement's, or the plan's before its draw). Raises what the
        connection raises for the whole store: ``StoreLocked`` once the busy
        budget is spent, storage faults.
        """
        await self._ready()
        self._refresh_statistics_if_due()
        recover = (_sql("recover_leases"), {"lease_expired_error": LEASE_EXPIRED_JSON})
        committed: builtins.list[Settled] = []
        refused: builtins.list[BaseException] = []

        async def commit_with(claim: tuple[str, dict[str, Any]] | None) -> builtins.list[Task]:
            if committed:
                raise RuntimeError("a single_draw plan drew more than once")
            try:
                done, error = await self._retrying(settle_and_claim, writes, recover, claim)
            except BaseException as exc:
                refused.append(exc)
                raise
            if done is None:
                assert error is not None
                raise _RolledBack(self._fault_of(error))
            committed.append(done)
            return in_claim_order(_task(r) for r in done[2])

        async def draw(draw_names: Sequence[str] | None, limit: int) -> builtins.list[Task]:
            variant = self._draw_variant(args.queues, draw_names, limit)
            if variant is None:
                return await commit_with(None)
            sql, params = _claim_statement(*variant)
            params.update(worker_id=args.worker_id, lease_ms=args.lease_ms)
            return await commit_with((sql, params))

        try:
            value = await plan(draw)
            if not committed:
                await commit_with(None)
        except _RolledBack as rolled_back:
            return rolled_back.error
        except Exception as exc:
            if refused and exc is refused[0]:
                raise  # the store's own failure, not the transaction's
            if not committed:
                return exc
            return None, exc, committed[0]
        return value, None, committed[0]

    def _fault_of(self, exc: Exception) -> Exception:
        """``exc`` as its engine error when it is a storage fault, else itself."""
        return sqlite_fault(exc, self._path, self._busy_timeout_ms) or exc


class _RolledBack(Exception):
    """A single-draw transaction that rolled back: nothing of it landed."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error
