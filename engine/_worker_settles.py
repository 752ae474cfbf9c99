"""The worker's settle queue: what its handlers' outcomes become, sharing commits.

``Settlement`` turns a call's outcome into owned writes (a completion, with
or without a result, or a failure with its retry backoff); ``SettleQueue``
sends them. One write is in flight at a time and everything that arrives
meanwhile goes out together in the next, so the group follows the load with
no timer: the first settlement leaves at once, those arriving during its round
trip leave together after it. Where the store offers a completing claim, the
worker's ``ride`` hook takes the group instead, and the settlements commit in
one transaction with the claim that refills the slots they free.

Promises kept: each caller learns its own task's outcome; a value that cannot
be encoded fails its own caller before anything is grouped; a statement the
database refuses rolls back the shared transaction and every settlement is
then written alone, so it costs only its own task; a slot is given back only
after the write that settles it committed (``_worker_running`` releases it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine import _envelopes as envelopes
from engine._backoff import retry_delay_ms
from engine._context import TaskContext
from engine._errors import LostLease, SerializationError, StoreUnavailable
from engine._models import Task
from engine._worker_calls import Call, Report, leftovers

if TYPE_CHECKING:
    from engine.store._base import OwnedSettle, SettleOutcome, TaskStore

#: What a group's write did: the ids ``complete_many`` settled (an id missing
#: lost its lease), and per riding settlement its row, None (lost) or its error.
Written = tuple[set[str], "dict[str, SettleOutcome]"]

#: ``ride(task_ids, settles, freeing)``: write the group inside a claim session
#: and say what became of it, or None to decline; see ``Worker._claim_completing``.
Ride = Callable[[list[str], "list[OwnedSettle]", list[Call]], Awaitable[Written | None]]


@dataclass(slots=True)
class _Entry:
    """One caller's part of a group: no-result ids, or one encoded settlement."""

    ids: list[str]
    settle: OwnedSettle | None
    future: asyncio.Future[Any]
    freeing: Call | None


class SettleQueue:
    """Settlements written together: ``complete_many`` for the no-result ones, the rest as rows.

    A ``ride`` hook may take the write instead: the worker then settles the
    group in the same transaction as the claim that fills the slots it frees.
    """

    def __init__(self, store: TaskStore, worker_id: str, ride: Ride | None = None) -> None:
        self._store = store
        self._worker_id = worker_id
        self._ride = ride
        self._pending: list[_Entry] = []
        self._writer: asyncio.Task[None] | None = None

    async def complete(self, task_ids: list[str], freeing: Call | None = None) -> set[str]:
        """Settle owned tasks with no result.

        Args:
            task_ids: the tasks.
            freeing: the call whose slot this write frees (it is the call's
                only settlement write), or None.

        Returns:
            A set holding each of ``task_ids`` that was settled; one missing
            lost its lease.

        Raises:
            Exception: whatever the store raised for the write they were part of.
        """
        settled: set[str] = await self._enqueue(_Entry(task_ids, None, self._future(), freeing))
        return settled

    async def settle(self, settle: OwnedSettle, freeing: Call | None = None) -> Task | None:
        """Write one encoded settlement (``owned_complete`` / ``owned_fail``).

        Returns:
            The row written, or None if the lease was lost.

        Raises:
            Exception: what its own write raised (never another task's error).
        """
        row: Task | None = await self._enqueue(_Entry([], settle, self._future(), freeing))
        return row

    @staticmethod
    def _future() -> asyncio.Future[Any]:
        return asyncio.get_running_loop().create_future()

    async def _enqueue(self, entry: _Entry) -> Any:
        self._pending.append(entry)
        if self._writer is None:
            # Starts on the next loop pass: settlements of this pass join it.
            self._writer = asyncio.ensure_future(self._write_all())
        return await entry.future

    async def _write_all(self) -> None:
        try:
            while self._pending:
                pending, self._pending = self._pending, []
                await self._write(pending)
        finally:
            self._writer = None

    async def _write(self, pending: list[_Entry]) -> None:
        task_ids = [task_id for e in pending for task_id in e.ids]
        settles = [e.settle for e in pending if e.settle is not None]
        try:
            written: Written | None = None
            if self._ride is not None:
                freeing = [e.freeing for e in pending if e.freeing is not None]
                written = await self._ride(task_ids, settles, freeing)
            if written is None:
                written = await self._alone(task_ids, settles)
        except _IdsFailed as failed:
            self._answer([e for e in pending if e.settle is not None], (set(), failed.rows))
            await self._after_failure([e for e in pending if e.settle is None], failed.error)
            return
        except Exception as exc:
            await self._after_failure(pending, exc)
            return
        except BaseException:
            _cancel_all(pending)
            raise
        self._answer(pending, written)

    async def _after_failure(self, pending: list[_Entry], exc: Exception) -> None:
        """Nothing of ``pending`` was written (the ride raises only then, or for a
        lost connection): each alone, so only the caller whose own row failed
        the shared statement gets the error."""
        tasks = sum(len(e.ids) for e in pending) + sum(e.settle is not None for e in pending)
        if tasks > 1 and not isinstance(exc, StoreUnavailable):
            await self._write_apart(pending)
        else:
            _fail_all(pending, exc)

    def _answer(self, pending: list[_Entry], written: Written) -> None:
        settled, rows = written
        for e in pending:
            if e.future.done():  # a cancelled caller's write landed all the same
                continue
            if e.settle is None:
                e.future.set_result(settled)
                continue
            outcome = rows.get(e.settle.task_id)
            if isinstance(outcome, Exception):
                e.future.set_exception(outcome)
            else:
                e.future.set_result(outcome)

    async def _alone(self, task_ids: list[str], settles: list[OwnedSettle]) -> Written:
        """The group without a claim: one statement for the ids, one row write each
        for the rest, all issued in one loop pass (the store's group commit joins them).

        Raises:
            Exception: ``complete_many`` failed (the settlements then were not sent).
        """
        if not settles:
            return await self._complete_many(task_ids), {}
        if not task_ids:
            return set(), await self._store.settle_each(settles)
        many = asyncio.ensure_future(self._complete_many(task_ids))
        rows = await self._store.settle_each(settles)
        try:
            settled = await many
        except Exception as exc:
            # The rows landed: only the ids go on to be written apart.
            raise _IdsFailed(rows, exc) from exc
        return settled, rows

    async def _complete_many(self, task_ids: list[str]) -> set[str]:
        if not task_ids:
            return set()
        if len(task_ids) == 1:
            return await self._complete_one(task_ids[0])
        return await self._store.complete_many(task_ids=task_ids, worker_id=self._worker_id)

    async def _complete_one(self, task_id: str) -> set[str]:
        """One task alone: ``complete`` with no result, the same write as ``complete_many``.

        It returns the committed row, and its done signal hands that row to a
        waiter in this process (a ``call()`` of a handler that returns
        nothing), which then needs no read; ``complete_many`` returns ids only.
        """
        try:
            await self._store.complete(task_id=task_id, worker_id=self._worker_id, result=None)
        except LostLease:
            return set()
        return {task_id}

    async def _write_apart(self, pending: list[_Entry]) -> None:
        """Each task's settlement on its own; a caller fails only if one of its own did."""
        try:
            for e in pending:
                if e.settle is not None:
                    rows = await self._store.settle_each([e.settle])
                    if not e.future.done():
                        self._answer([e], (set(), rows))
                    continue
                settled: set[str] = set()
                error: Exception | None = None
                for task_id in e.ids:
                    try:
                        settled |= await self._complete_many([task_id])
                    except Exception as exc:
                        error = error or exc
                if e.future.done():
                    continue
                if error is not None:
                    e.future.set_exception(error)
                else:
                    e.future.set_result(settled)
        except BaseException:
            _cancel_all(pending)
            raise


class _IdsFailed(Exception):
    """``complete_many`` failed after the group's rows were written (``rows``)."""

    def __init__(self, rows: dict[str, SettleOutcome], error: Exception) -> None:
        super().__init__("complete_many failed")
        self.rows = rows
        self.error = error


def _fail_all(pending: list[_Entry], exc: Exception) -> None:
    for e in pending:
        if not e.future.done():
            e.future.set_exception(exc)


def _cancel_all(pending: list[_Entry]) -> None:
    for e in pending:
        e.future.cancel()


class Settlement:
    """The worker's own writes of a call's outcome, each owned by its lease.

    A write refused for a lost lease marks the context lost and leaves the task
    to recovery; any other failed write is reported, and the task's lease then
    decides what happens to it.
    """

    def __init__(
        self,
        store: TaskStore,
        worker_id: str,
        *,
        backoff_ms: int,
        backoff_max_ms: int,
        report: Report,
        queue: SettleQueue,
    ) -> None:
        self._store = store
        self._worker_id = worker_id
        self._backoff = (backoff_ms, backoff_max_ms)
        self._report = report
        self._queue = queue

    async def returned(self, call: Call, outcome: Any) -> None:
        """The handler returned ``outcome``: complete what it left unsettled.

        A batch handler's outcome maps task ids to results; a task it does not
        name (or any outcome but a mapping) completes without a result.
        """
        contexts = leftovers(call)
        if not contexts:
            return
        if call.registration.batch is None:
            await self.complete(contexts[0], outcome, freeing=call)
            return
        if not isinstance(outcome, Mapping) or not outcome:
            await self.quietly(contexts, call)  # the common batch return: no results
            return
        results = outcome
        bare = [c for c in contexts if results.get(c.task_id) is None]
        valued = [c for c in contexts if results.get(c.task_id) is not None]
        if not valued:
            await self.quietly(bare, call)
            return
        writes = [self.complete(c, results[c.task_id]) for c in valued]
        if bare:
            writes.append(self.quietly(bare))
        await asyncio.gather(*writes)

    async def raised(self, call: Call, envelope: dict[str, Any], retryable: bool) -> None:
        """The handler failed: record ``envelope`` on every task it left unsettled."""
        contexts = leftovers(call)
        if len(contexts) == 1:
            await self.fail(contexts[0], envelope, retryable, freeing=call)
        elif contexts:
            await asyncio.gather(*(self.fail(c, envelope, retryable) for c in contexts))

    async def quietly(self, contexts: list[TaskContext], freeing: Call | None = None) -> None:
        """Complete ``contexts`` with no result, sharing a statement with others.

        ``freeing``: the call this write settles entirely (its slot may then
        be refilled by a claim committed together with it).
        """
        try:
            settled = await self._queue.complete([c.task_id for c in contexts], freeing)
        except Exception as exc:
            for ctx in contexts:
                self._report(exc, "execute", ctx.task_id)
            return
        for ctx in contexts:
            if ctx.task_id not in settled:
                ctx.mark_lost()

    async def complete(self, ctx: TaskContext, result: Any, freeing: Call | None = None) -> None:
        """Complete one task; a result with no JSON form fails it (permanently) instead."""
        if result is None:
            await self.quietly([ctx], freeing)
            return
        try:
            owned = self._store.owned_complete(
                task_id=ctx.task_id, worker_id=self._worker_id, result=result
            )
        except SerializationError as exc:
            await self.fail(ctx, envelopes.unserializable_result(exc), False, freeing)
            return
        try:
            row = await self._queue.settle(owned, freeing)
        except Exception as exc:
            self._report(exc, "execute", ctx.task_id)
            return
        if row is None:
            ctx.mark_lost()

    async def fail(
        self,
        ctx: TaskContext,
        envelope: dict[str, Any],
        retryable: bool,
        freeing: Call | None = None,
    ) -> None:
        """Record a failure: requeued after its backoff while it may retry, else failed.

        Refused for a lost lease: the task is recovery's now, nothing to say.
        """
        base_ms, cap_ms = self._backoff
        pause_ms = retry_delay_ms(ctx.attempt, base_ms=base_ms, cap_ms=cap_ms, retryable=retryable)
        try:
            owned = self._store.owned_fail(
                task_id=ctx.task_id,
                worker_id=self._worker_id,
                error=envelope,
                retryable=retryable,
                delay_ms=pause_ms,
            )
            await self._queue.settle(owned, freeing)
        except Exception as exc:
            self._report(exc, "execute", ctx.task_id)

    async def no_handler(self, task: Task) -> None:
        """Fail a claimed task whose name has no handler here (permanent)."""
        envelope = envelopes.no_handler(task.name)
        await self._guarded(
            task.id,
            self._store.fail(
                task_id=task.id, worker_id=self._worker_id, error=envelope, retryable=False
            ),
        )

    async def _guarded(self, task_id: str, write: Awaitable[object]) -> None:
        """Await an owned write whose outcome nobody waits for.

        Refused for a lost lease: the task is recovery's now, nothing to say.
        Any other failure goes to ``report``; the lease then decides the task.
        """
        try:
            await write
        except LostLease:
            return
        except Exception as exc:
            self._report(exc, "execute", task_id)
