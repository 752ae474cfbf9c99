"""Running a worker's handler calls: slot, handler, abandonment, heartbeats, release.

``Worker`` is built from rooms of one job each. Here ``CallRunner`` turns a
claimed batch into a ``Call`` that holds a slot (and a resource unit and its
payload bytes), runs the handler (an ``async def`` on the loop, a ``def`` on
one of the worker's own threads, ``_worker_threads``), gives up on it past
``max_run_ms``, renews its leases by heartbeat and, once ``Settlement`` has
written the outcome, gives the slot back and wakes the loop. ``_worker_loop``
polls for the tasks (``ClaimLoop``); ``_worker`` is the public class (options,
registration, controls, snapshot, entry points).
"""

from __future__ import annotations

import asyncio
import inspect
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any

from engine import _envelopes as envelopes
from engine._context import TaskContext
from engine._errors import LostLease, TaskError
from engine._models import Task
from engine._worker_calls import (
    Call,
    NameStats,
    invoke,
    leftovers,
    renew_leases,
)
from engine._worker_plan import Registration, payload_bytes
from engine._worker_settles import Settlement
from engine._worker_snapshot import ErrorReport, report_of
from engine._worker_threads import HandlerThreads

if TYPE_CHECKING:
    from engine.store._base import TaskStore

#: ``on_error(exc, info)``: told of every error the worker survives.
OnError = Callable[[BaseException, dict[str, Any]], Any]


class CallRunner:
    """The calls in flight and everything done for them (a base of ``Worker``).

    The state below is shared with the claim loop and set by ``Worker.__init__``.
    """

    _store: TaskStore
    _worker_id: str
    _lease_ms: int
    _heartbeat_ms: int
    _backoff_ms: int
    _backoff_max_ms: int
    _max_run_ms: int | None
    _max_bytes: int | None
    _on_error: OnError | None
    _settlement: Settlement
    _registrations: dict[str, Registration]
    _stats: dict[str, NameStats]
    _calls: dict[int, Call]
    _call_tasks: set[asyncio.Task[None]]
    #: The task of each call still in its handler (gone once its settlement starts).
    _in_handler: dict[int, asyncio.Task[None]]
    #: Set by ``_give_up_handlers``: calls started from now on are given up at once.
    _giving_up: bool
    _call_ids: Iterator[int]
    _by_resource: dict[str, int]
    #: Payload bytes of the calls in flight.
    _bytes: int
    #: Calls whose handler returned and whose settlement writes are in flight.
    _settling: int
    _errors: deque[ErrorReport]
    _failures: deque[ErrorReport]
    _threads: HandlerThreads
    _loop: asyncio.AbstractEventLoop | None
    #: Set by anything that should end an idle or full wait early: a call
    #: ending, a released resource unit, stop, resume, a new registration.
    _wakeup: asyncio.Event | None
    #: The loop is in its idle sleep (``ClaimLoop._idle``).
    _idling: bool
    #: The last poll found every source short of due work (or the probe found
    #: none): a slot freed now cannot make anything claimable (a new task
    #: signals, a due time or an expired lease waits for the idle sleep's own
    #: poll), so it does not end the idle sleep for a poll that would find nothing.
    _last_dry: bool

    def _slot_freed(self) -> None:
        """A call ended: poke the loop unless it idles after a dry poll."""
        if not (self._idling and self._last_dry):
            self._poke()

    def _poke(self) -> None:
        wakeup, loop = self._wakeup, self._loop
        if wakeup is None or loop is None or loop.is_closed():
            return
        try:
            on_loop = asyncio.get_running_loop() is loop
        except RuntimeError:
            on_loop = False
        if on_loop:
            wakeup.set()
        else:
            loop.call_soon_threadsafe(wakeup.set)

    def _report(self, exc: BaseException, phase: str, task_id: str | None = None) -> None:
        """Keep ``exc`` among the recent errors and pass it to ``on_error`` if set."""
        self._errors.append(report_of(exc, phase, task_id))
        hook = self._on_error
        if hook is None:
            return
        info: dict[str, Any] = {"phase": phase}
        if phase == "execute":
            info["task_id"] = task_id
        try:
            reply = hook(exc, info)
        except Exception:
            return  # on_error is the user's code: whatever it raises stays here
        if inspect.isawaitable(reply):
            pending = asyncio.ensure_future(reply)
            pending.add_done_callback(_consume_outcome)

    # -- starting a call ---------------------------------------------------------------

    def _dispatch(self, name: str, tasks: list[Task], lease_deadline: float) -> None:
        registration = self._registrations.get(name)
        if registration is None:
            for task in tasks:
                self._spawn(self._settlement.no_handler(task))
            return
        contexts = [
            TaskContext(
                task,
                store=self._store,
                worker_id=self._worker_id,
                lease_ms=self._lease_ms,
                retry_backoff_ms=self._backoff_ms,
                retry_backoff_max_ms=self._backoff_max_ms,
                lease_deadline=lease_deadline,
            )
            for task in tasks
        ]
        call = Call(next(self._call_ids), registration, contexts)
        if self._max_bytes is not None:
            call.bytes = sum(payload_bytes(t.payload) for t in tasks)
        self._hold(call)
        self._in_handler[call.call_id] = self._spawn(self._run_call(call))
        if self._giving_up:
            self._give_up(call)

    def _spawn(self, coro: Awaitable[None]) -> asyncio.Task[None]:
        task = asyncio.ensure_future(coro)
        self._call_tasks.add(task)
        task.add_done_callback(self._call_tasks.discard)
        return task

    def _hold(self, call: Call) -> None:
        self._calls[call.call_id] = call
        stats = self._stats[call.name]
        stats.calls += 1
        stats.tasks += len(call.contexts)
        resource = call.registration.resource
        if resource is not None:
            self._by_resource[resource] = self._by_resource.get(resource, 0) + 1
        self._bytes += call.bytes

    def _release(self, call: Call) -> None:
        """Give back the call's slot, resource unit and bytes (once), and wake the loop."""
        if self._calls.pop(call.call_id, None) is None:
            return
        if call.heartbeat is not None:
            call.heartbeat.cancel()
        stats = self._stats[call.name]
        stats.calls -= 1
        stats.tasks -= len(call.contexts)
        resource = call.registration.resource
        if resource is not None:
            self._by_resource[resource] -= 1
        self._bytes -= call.bytes
        self._slot_freed()

    # -- one call ----------------------------------------------------------------------

    async def _run_call(self, call: Call) -> None:
        self._arm_heartbeat(call)
        settle: Awaitable[None] | None = None
        try:
            if self._max_run_ms is None:
                outcome: Any = await invoke(call, self._threads)
            else:
                handler = asyncio.ensure_future(invoke(call, self._threads))
                try:
                    done, _ = await asyncio.wait((handler,), timeout=self._max_run_ms / 1000)
                except asyncio.CancelledError:  # given up on (_give_up)
                    handler.cancel()
                    handler.add_done_callback(_consume_outcome)
                    raise
                if not done:
                    await self._abandon(call, handler, self._max_run_ms)
                    return
                outcome = handler.result()
        except LostLease:
            for ctx in call.contexts:
                if not ctx.settled:
                    ctx.mark_lost()
        except TaskError as exc:
            self._record_failure(call, exc)
            settle = self._settlement.raised(call, envelopes.task_error(exc), exc.retryable)
        except Exception as exc:
            self._record_failure(call, exc)
            settle = self._settlement.raised(call, envelopes.handler_raised(exc), True)
        else:
            settle = self._settlement.returned(call, outcome)
        finally:
            # From here on the call settles (or is done): no longer given up on.
            self._in_handler.pop(call.call_id, None)
            if settle is None:
                self._release(call)
        if settle is not None:
            self._settling += 1
            try:
                await settle
            finally:
                self._settling -= 1
                self._release(call)
                if not self._settling:
                    # The loop waits for settlements; a ride may have released
                    # this call already, so say it again.
                    self._slot_freed()

    def _record_failure(self, call: Call, exc: BaseException) -> None:
        first = call.contexts[0]
        self._failures.append(
            report_of(exc, f"handler {call.name}", first.task_id, first.task.attempt)
        )

    async def _abandon(self, call: Call, handler: asyncio.Future[Any], max_run_ms: int) -> None:
        """``max_run_ms`` passed: flag every context, drop the handler, fail the leftovers."""
        call.abandoned = True
        unsettled = leftovers(call)
        for ctx in call.contexts:
            ctx.mark_lost()
        handler.cancel()
        # Nobody awaits the handler now; its late exception is consumed here.
        handler.add_done_callback(_consume_outcome)
        self._release(call)
        envelope = envelopes.handler_timed_out(call.name, max_run_ms)
        self._failures.append(
            report_of(
                TimeoutError(envelope["message"]),
                f"handler {call.name}",
                call.contexts[0].task_id,
                call.contexts[0].task.attempt,
            )
        )
        await asyncio.gather(*(self._settlement.fail(c, envelope, True) for c in unsettled))

    def _give_up_handlers(self) -> None:
        """Drop every call still in its handler, now and from now on.

        The second stop signal's cold stop: each context is flagged lost, an
        ``async def`` is cancelled, a ``def``'s thread is abandoned, and the slot
        is released. Nothing is written: the tasks stay ``running`` until their
        leases end and lease recovery takes them, as for any lost lease.
        Settlement writes already under way go on and finish.
        """
        self._giving_up = True
        calls = [c for c in self._calls.values() if c.call_id in self._in_handler]
        for call in calls:
            self._give_up(call)

    def _give_up(self, call: Call) -> None:
        run = self._in_handler.pop(call.call_id)
        call.abandoned = True
        for ctx in call.contexts:
            # Lost, and settled by nobody: whatever the handler still returns or
            # raises (it may answer the cancel) is written nowhere.
            ctx.mark_lost()
            ctx.mark_settled()
        run.cancel()  # a def handler's thread is abandoned by the cancel (HandlerThreads.run)
        # Not waited for by ``run`` either: a handler that swallows its cancellation
        # would otherwise keep the stopping worker (and ``serve``'s process) for ever.
        self._call_tasks.discard(run)
        self._release(call)
        self._poke()

    # -- heartbeats ----------------------------------------------------------------------

    def _arm_heartbeat(self, call: Call) -> None:
        # A timer rather than a task per call: most calls end before the first beat.
        loop = asyncio.get_running_loop()
        call.heartbeat = loop.call_later(self._heartbeat_ms / 1000, self._beat, call)

    def _beat(self, call: Call) -> None:
        call.heartbeat = None
        if call.call_id in self._calls and not call.abandoned:
            self._spawn(self._heartbeat(call))

    async def _heartbeat(self, call: Call) -> None:
        await renew_leases(
            self._store,
            call,
            worker_id=self._worker_id,
            lease_ms=self._lease_ms,
            report=self._report,
        )
        if call.call_id in self._calls and not call.abandoned and call.live():
            self._arm_heartbeat(call)


def _consume_outcome(future: asyncio.Future[Any]) -> None:
    """Done callback for a future nobody awaits: its exception is read, so asyncio stays quiet."""
    if not future.cancelled():
        future.exception()
