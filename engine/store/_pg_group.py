"""Group commit for the Postgres store's single-row writes.

Every commit on a durable server waits for its WAL flush, so N settlements as
N autocommit statements cost N flushes and N round trips. Here writes queue up;
one flush at a time takes every write waiting and sends them pipelined inside
one transaction (BEGIN, the statements, COMMIT: one round trip, one WAL flush),
answering each caller only after the COMMIT. Writes that arrive during a flush
form the next one, so the batch size follows the load by itself. The first
write of an idle group waits one loop pass for company; still alone, it runs as
a plain autocommit statement in its caller's own task, exactly as it would
without the group (no flusher task to start, no second wake-up for its answer).

Only statements that are safe to share a transaction join: ownership-checked
updates of one row (a lost lease matches no row, it never raises) and plain
inserts. The inserts of one flush travel as a single multi-row statement (one
statement to send, parse and bind instead of one per task); a flush of inserts
alone is that one autocommit statement, atomic by itself. Rows are written in id
order, so two flushes touching the same rows (of two stores, two processes) lock
them in the same order. If the shared
transaction fails for a reason other than connection loss (a deadlock with
another transaction, a statement error, a value the driver cannot send),
nothing of it was committed and each write is retried on its own, so every
caller gets the outcome it would have had alone. Connection loss fails the
whole batch, as it fails a lone write: the COMMIT may or may not have landed,
so nothing is retried.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson
import psycopg

from engine._aio import resolve

T = TypeVar("T")
Conn = psycopg.AsyncConnection[dict[str, Any]]
Row = dict[str, Any] | None
#: Runs work on a pooled connection (the store's ``_on_connection``).
Runner = Callable[[Callable[[Conn], Awaitable[Any]]], Awaitable[Any]]

#: Writes per shared transaction: bounds the time a flush holds its row locks.
_MAX_BATCH = 256


@dataclass(slots=True)
class _Write:
    sql: str | None  # None: a plain insert (joins the flush's multi-row insert)
    params: Mapping[str, Any]
    order: str  # the row's id: the lock order
    future: asyncio.Future[Row]


def lost(conn: Conn, exc: BaseException) -> bool:
    """True if ``exc`` came with the loss of ``conn`` (the outcome is then unknown)."""
    return isinstance(exc, psycopg.OperationalError) and (conn.broken or conn.closed)


class GroupCommit:
    """The write queue of one Postgres store (one event loop).

    Args:
        run: runs a coroutine function on a pooled connection, mapping
            connection loss to the store's ``StoreUnavailable``.
        insert_one: the statement inserting one row from one parameter mapping.
        insert_many: the same insert for many rows, taking one parameter,
            ``rows``: a JSON array of ``insert_one``'s parameter mappings; it
            returns the rows, each with its ``id``.
    """

    def __init__(self, run: Runner, insert_one: str, insert_many: str) -> None:
        self._run = run
        self._insert_one = insert_one
        self._insert_many = insert_many
        self._queue: list[_Write] = []
        #: A flush is on its way: the flusher task's, or a lone caller's own.
        self._busy = False
        self._flusher: asyncio.Task[None] | None = None  # held: the loop keeps weak refs

    @property
    def idle(self) -> bool:
        """No write waiting and no flush on its way."""
        return not self._queue and not self._busy

    async def write(self, sql: str, params: Mapping[str, Any], order: str) -> Row:
        """Run one statement returning at most one row; its row after COMMIT."""
        return await self._enqueue(sql, params, order)

    async def insert(self, params: Mapping[str, Any]) -> Row:
        """Insert one row (``params["id"]`` its id); the row after COMMIT."""
        return await self._enqueue(None, params, params["id"])

    async def _enqueue(self, sql: str | None, params: Mapping[str, Any], order: str) -> Row:
        future: asyncio.Future[Row] = asyncio.get_running_loop().create_future()
        w = _Write(sql, params, order, future)
        self._queue.append(w)
        if self._busy:
            return await future  # the flush on its way, or the next one, takes it
        self._busy = True
        try:
            # One loop pass: every write issued in this same pass joins.
            await asyncio.sleep(0)
        except BaseException:
            self._queue.remove(w)
            self._hand_over()
            raise
        if len(self._queue) > 1:
            self._hand_over()
            return await future
        # Alone after all: run it right here, as a plain autocommit statement
        # (no task to start, no second wake-up to hear the answer).
        self._queue.clear()
        try:
            return await self._run(self._single(w))  # type: ignore[no-any-return]
        finally:
            self._hand_over()

    def _hand_over(self) -> None:
        """A flush ended (or never started): the flusher takes what waits, if any."""
        if self._queue:
            self._flusher = asyncio.ensure_future(self._flush_all())
        else:
            self._busy = False

    async def _flush_all(self) -> None:
        try:
            while self._queue:
                batch = self._queue[:_MAX_BATCH]
                del self._queue[:_MAX_BATCH]
                await self._flush(batch)
        finally:
            self._busy = False
            self._flusher = None

    async def _flush(self, batch: list[_Write]) -> None:
        try:
            if len(batch) == 1:
                outcomes: list[Row | BaseException] = [await self._run(self._single(batch[0]))]
            else:
                outcomes = await self._run(self._shared(batch))
        except Exception as exc:
            for w in batch:
                resolve(w.future, exc)
            return
        except BaseException:
            for w in batch:  # cancelled with the loop: so are the callers
                w.future.cancel()
            raise
        for w, outcome in zip(batch, outcomes, strict=True):
            resolve(w.future, outcome)

    def _statement(self, w: _Write) -> str:
        return self._insert_one if w.sql is None else w.sql

    def _single(self, w: _Write) -> Callable[[Conn], Awaitable[Row]]:
        sql = self._statement(w)

        async def work(conn: Conn) -> Row:
            return await (await conn.execute(sql, w.params)).fetchone()

        return work

    @staticmethod
    def _many_params(inserts: list[_Write]) -> dict[str, str]:
        """``insert_many``'s parameter: every row's parameters as one JSON array.

        One text parameter, encoded in C, instead of an array per column (the
        driver quotes array elements one by one in Python).
        """
        return {"rows": orjson.dumps([w.params for w in inserts]).decode()}

    def _shared(
        self, batch: list[_Write]
    ) -> Callable[[Conn], Awaitable[list[Row | BaseException]]]:
        inserts = [w for w in batch if w.sql is None]
        updates = sorted((w for w in batch if w.sql is not None), key=lambda w: w.order)

        async def work(conn: Conn) -> list[Row | BaseException]:
            try:
                if not updates:
                    # Inserts alone: one autocommit statement is one transaction.
                    cur = await conn.execute(self._insert_many, self._many_params(inserts))
                    inserted = await cur.fetchall()
                    singles: list[tuple[_Write, Any]] = []
                else:
                    many = None
                    # A lone insert is sent as itself, with the updates.
                    steps = ([] if len(inserts) > 1 else inserts) + updates
                    async with conn.pipeline(), conn.transaction():
                        if len(inserts) > 1:
                            many = await conn.execute(self._insert_many, self._many_params(inserts))
                        singles = [
                            (w, await conn.execute(self._statement(w), w.params)) for w in steps
                        ]
                    inserted = [] if many is None else await many.fetchall()
                outcomes = {id(w): await cur.fetchone() for w, cur in singles}
                by_id = {row["id"]: row for row in inserted}
                for w in inserts:
                    if id(w) not in outcomes:
                        outcomes[id(w)] = by_id[w.params["id"]]
                return [outcomes[id(w)] for w in batch]
            except Exception as exc:
                if lost(conn, exc):
                    raise
            # Rolled back as a whole: each write alone, as if never grouped.
            await _abort(conn)
            return [await self._alone(conn, w) for w in batch]

        return work

    async def _alone(self, conn: Conn, w: _Write) -> Row | BaseException:
        try:
            return await (await conn.execute(self._statement(w), w.params)).fetchone()
        except Exception as exc:
            if lost(conn, exc):
                raise
            return exc


async def _abort(conn: Conn) -> None:
    """Roll back whatever a failed pipeline left open (normally nothing is)."""
    if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        await conn.execute("rollback")
