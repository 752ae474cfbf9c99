"""A handler call: its bookkeeping, its invocation, its heartbeats.

``Call`` is the bookkeeping for one call in flight (one task, or a batch);
``invoke`` runs its handler; ``renew_leases`` is one heartbeat; ``leftovers``
are the contexts the worker settles itself (``_worker_settles`` writes what
became of them). None of it decides *when*: the worker's loop schedules calls,
beats and settlements.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine._clock import now_ms
from engine._context import TaskContext
from engine._errors import StoreUnavailable
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
