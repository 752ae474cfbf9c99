"""A handler call and everything written on its behalf: invocation, heartbeats, settlement.

``Call`` is the bookkeeping for one call in flight (one task, or a batch).
``Settlement`` writes what became of it: a completion (shared statements for
completions without a result, see ``Completions``) or a failure with its
retry backoff; ``renew_leases`` is one heartbeat. None of it decides *when*:
the worker's loop schedules calls, beats and settlements.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine import _envelopes as envelopes
from engine._backoff import retry_delay_ms
from engine._clock import now_ms
from engine._context import TaskContext
from engine._errors import LostLease, SerializationError, StoreUnavailable
from engine._models import Task
from engine._worker_plan import Registration
from engine._worker_snapshot import CallSnapshot, CallTaskSnapshot, Shortfall
from engine._worker_threads import HandlerThreads

if TYPE_CHECKING:
    from engine.store._base import TaskStore

#: ``report(exc, phase, task_id)``: an error the worker survived.
Report = Callable[[BaseException, str, "str | None"], None]


class Call:
    """One handler call in flight and the bookkeeping the worker keeps for it."""

    __slots__ = (
        "abandoned",
        "bytes",
        "call_id",
        "contexts",
        "heartbeat",
        "last_heartbeat_ms",
        "lease_until_ms",
        "name",
        "registration",
        "started_at_ms",
    )

    def __init__(
        self, call_id: int, registration: Registration, contexts: list[TaskContext]
    ) -> None:
        self.call_id = call_id
        self.name = registration.name
        self.registration = registration
        self.contexts = contexts
        self.started_at_ms = now_ms()
        leases = [c.task.lease_until_ms for c in contexts if c.task.lease_until_ms is not None]
        self.lease_until_ms: int | None = min(leases) if leases else None
        self.last_heartbeat_ms: int | None = None
        self.heartbeat: asyncio.TimerHandle | None = None
        self.bytes = 0
        self.abandoned = False

    def live(self) -> list[TaskContext]:
        """The contexts neither settled nor known to have lost their lease."""
        return [c for c in self.contexts if not c.settled and not c.lost_lease]

    def renewed(
        self, beaten: list[TaskContext], reply: Mapping[str, bool], asked_at: float, lease_ms: int
    ) -> None:
        """Take in a heartbeat's reply for ``beaten`` (sent at monotonic ``asked_at``).

        A task the reply names keeps its lease (from when the beat was asked,
        the earliest the database could have started it) and shows whether a
        cancel was requested; one it leaves out, still unsettled, is lost.
        """
        stamp = now_ms()
        self.last_heartbeat_ms = stamp
        if reply:
            self.lease_until_ms = stamp + lease_ms
        good_until = asked_at + lease_ms / 1000
        for ctx in beaten:
            cancel = reply.get(ctx.task_id)
            if cancel is not None:
                ctx.extend_lease(good_until)
                ctx.observe_cancel(cancel)
            elif not ctx.settled:
                ctx.mark_lost()

    def snapshot(self) -> CallSnapshot:
        tasks = tuple(
            CallTaskSnapshot(
                task_id=c.task_id,
                attempt=c.attempt,
                settled=c.settled,
                lost=c.lost_lease,
                cancel_requested=c.cancel_seen,
                progress=c.reported_progress,
                message=c.reported_message,
            )
            for c in self.contexts
        )
        return CallSnapshot(
            call_id=self.call_id,
            name=self.name,
            task_ids=tuple(t.task_id for t in tasks),
            started_at_ms=self.started_at_ms,
            lease_until_ms=self.lease_until_ms,
            last_heartbeat_ms=self.last_heartbeat_ms,
            lost=any(t.lost for t in tasks),
            settled=all(t.settled for t in tasks),
            cancel_requested=any(t.cancel_requested for t in tasks),
            bytes=self.bytes,
            tasks=tasks,
        )


@dataclass(slots=True)
class NameStats:
    """Per registered name: calls and tasks in flight, and the last poll's accounting."""

    calls: int = 0
    tasks: int = 0
    offered: int | None = None
    claimed: int = 0
    shortfall: Shortfall | None = None


async def invoke(call: Call, threads: HandlerThreads) -> Any:
    """Run the call's handler: ``(contexts)`` for a batch, else ``(ctx[, payload])``.

    A plain function runs on one of the worker's ``threads``, so the loop goes
    on beating for it; cancelling this abandons the thread.
    """
    reg = call.registration
    if reg.batch is not None:
        args: tuple[Any, ...] = (call.contexts,)
    else:
        ctx = call.contexts[0]
        args = (ctx, ctx.payload) if reg.wants_payload else (ctx,)
    if reg.is_async:
        return await reg.fn(*args)
    task_ids = tuple(c.task_id for c in call.contexts)
    outcome = await threads.run(reg.fn, args, name=call.name, task_ids=task_ids)
    if inspect.isawaitable(outcome):
        outcome = await outcome
    return outcome


async def renew_leases(
    store: TaskStore, call: Call, *, worker_id: str, lease_ms: int, report: Report
) -> None:
    """One heartbeat for the call's live tasks.

    When the beat itself fails, only the tasks whose lease has run out by the
    local clock count as lost; the rest try again on the next beat. A shared
    statement that fails (the connection aside) is retried lease by lease, so
    one task's refused row costs only its own renewal.
    """
    beaten = call.live()
    if not beaten:
        return
    asked_at = time.monotonic()
    refused: set[str] = set()
    try:
        reply = await _renew(store, beaten, worker_id, lease_ms, report, refused)
    except Exception as exc:
        report(exc, "execute", beaten[0].task_id)
        refused.update(ctx.task_id for ctx in beaten)
    else:
        call.renewed([c for c in beaten if c.task_id not in refused], reply, asked_at, lease_ms)
    for ctx in beaten:
        if ctx.task_id in refused and ctx.lease_expired:
            ctx.mark_lost()


async def _renew(
    store: TaskStore,
    beaten: list[TaskContext],
    worker_id: str,
    lease_ms: int,
    report: Report,
    refused: set[str],
) -> dict[str, bool]:
    """``heartbeat_batch`` for ``beaten``; lease by lease if the shared statement fails.

    The ids whose own renewal raised are added to ``refused`` (and reported).
    """
    ids = [ctx.task_id for ctx in beaten]
    try:
        return await store.heartbeat_batch(task_ids=ids, worker_id=worker_id, lease_ms=lease_ms)
    except Exception as exc:
        if len(ids) == 1 or isinstance(exc, StoreUnavailable):
            raise
    reply: dict[str, bool] = {}
    for task_id in ids:
        try:
            reply.update(
                await store.heartbeat_batch(
                    task_ids=[task_id], worker_id=worker_id, lease_ms=lease_ms
                )
            )
        except Exception as exc:
            report(exc, "execute", task_id)
            refused.add(task_id)
    return reply


#: ``ride(task_ids, freeing)``: complete the tasks inside a claim session (the
#: settled ids), or None to decline; see ``Worker._claim_completing``.
Ride = Callable[[list[str], list["Call"]], Awaitable[set[str] | None]]


class Completions:
    """No-result completions, written together by ``complete_many``.

    Single-task calls that finish together and a batch's leftovers would each
    cost a statement; here one write is in flight at a time and everything
    that arrives meanwhile goes out in the next, so the batch size follows the
    load. Every caller still learns its own task's outcome.

    A ``ride`` hook may take the write instead: the worker then completes the
    tasks in the same transaction as the claim that fills the slots they free.
    """

    def __init__(self, store: TaskStore, worker_id: str, ride: Ride | None = None) -> None:
        self._store = store
        self._worker_id = worker_id
        self._ride = ride
        self._pending: list[tuple[list[str], asyncio.Future[set[str]], Call | None]] = []
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
        future: asyncio.Future[set[str]] = asyncio.get_running_loop().create_future()
        self._pending.append((task_ids, future, freeing))
        if self._writer is None:
            # Starts on the next loop pass: completions of this pass join it.
            self._writer = asyncio.ensure_future(self._write_all())
        return await future

    async def _write_all(self) -> None:
        try:
            while self._pending:
                pending, self._pending = self._pending, []
                await self._write(pending)
        finally:
            self._writer = None

    async def _write(
        self, pending: list[tuple[list[str], asyncio.Future[set[str]], Call | None]]
    ) -> None:
        task_ids = [task_id for ids, _, _ in pending for task_id in ids]
        try:
            settled = None
            if self._ride is not None:
                freeing = [call for _, _, call in pending if call is not None]
                settled = await self._ride(task_ids, freeing)
            if settled is None and len(task_ids) == 1:
                settled = await self._complete_one(task_ids[0])
            elif settled is None:
                settled = await self._store.complete_many(
                    task_ids=task_ids, worker_id=self._worker_id
                )
        except Exception as exc:
            if len(task_ids) > 1 and not isinstance(exc, StoreUnavailable):
                # One task's row may have failed the statement all of them
                # shared: write each alone, so only its caller gets the error.
                await self._write_apart(pending)
                return
            for _, future, _ in pending:
                if not future.done():
                    future.set_exception(exc)
            return
        except BaseException:
            for _, future, _ in pending:
                future.cancel()
            raise
        for _, future, _ in pending:
            if not future.done():  # a cancelled caller's write landed all the same
                future.set_result(settled)

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

    async def _write_apart(
        self, pending: list[tuple[list[str], asyncio.Future[set[str]], Call | None]]
    ) -> None:
        """Each task's completion on its own; a caller fails only if one of its own did."""
        try:
            for task_ids, future, _ in pending:
                settled: set[str] = set()
                error: Exception | None = None
                for task_id in task_ids:
                    try:
                        settled |= await self._store.complete_many(
                            task_ids=[task_id], worker_id=self._worker_id
                        )
                    except Exception as exc:
                        error = error or exc
                if future.done():
                    continue
                if error is not None:
                    future.set_exception(error)
                else:
                    future.set_result(settled)
        except BaseException:
            for _, future, _ in pending:
                future.cancel()
            raise


def leftovers(call: Call) -> list[TaskContext]:
    """The contexts the worker settles itself (each marked settled here).

    A context whose lease ran out while heartbeats failed is left to recovery:
    the task may have been claimed again, even by this worker id, and a write
    now would settle that later attempt with this one's outcome.
    """
    out = []
    for ctx in call.contexts:
        if not ctx.mark_settled():
            continue
        if ctx.lease_expired:
            ctx.mark_lost()
            continue
        out.append(ctx)
    return out


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
        completions: Completions,
    ) -> None:
        self._store = store
        self._worker_id = worker_id
        self._backoff = (backoff_ms, backoff_max_ms)
        self._report = report
        self._completions = completions

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
            await self.fail(contexts[0], envelope, retryable)
        elif contexts:
            await asyncio.gather(*(self.fail(c, envelope, retryable) for c in contexts))

    async def quietly(self, contexts: list[TaskContext], freeing: Call | None = None) -> None:
        """Complete ``contexts`` with no result, sharing a statement with others.

        ``freeing``: the call this write settles entirely (its slot may then
        be refilled by a claim committed together with it).
        """
        try:
            settled = await self._completions.complete([c.task_id for c in contexts], freeing)
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
            await self._store.complete(
                task_id=ctx.task_id, worker_id=self._worker_id, result=result
            )
        except LostLease:
            ctx.mark_lost()
        except SerializationError as exc:
            await self.fail(ctx, envelopes.unserializable_result(exc), False)
        except Exception as exc:
            self._report(exc, "execute", ctx.task_id)

    async def fail(self, ctx: TaskContext, envelope: dict[str, Any], retryable: bool) -> None:
        """Record a failure: requeued after its backoff while it may retry, else failed."""
        base_ms, cap_ms = self._backoff
        pause_ms = retry_delay_ms(ctx.attempt, base_ms=base_ms, cap_ms=cap_ms, retryable=retryable)
        await self._guarded(
            ctx.task_id,
            self._store.fail(
                task_id=ctx.task_id,
                worker_id=self._worker_id,
                error=envelope,
                retryable=retryable,
                delay_ms=pause_ms,
            ),
        )

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
