"""The worker's claim loop: poll while slots are free, sleep until something changes.

``ClaimLoop`` (a base of ``Worker``) runs until ``stop()``: each step waits
while the worker is paused, full, over its byte budget or settling, else runs
one claim session (``_worker_plan`` sizes each source's quota) and starts the
calls it produced; when every draw came up short it sleeps ``poll_interval_ms``,
ended early by a claimable-task signal or a wakeup. On a store that declares
``completing_claim`` the completions that free slots ride along with the claim
that refills them (``_claim_completing``). On the way out it drains the calls
in flight (``_worker_running``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, cast

from engine._clock import now_ms
from engine._rules import at_least
from engine._worker_calls import Call
from engine._worker_plan import InFlight, PollResult, Source, plan_poll
from engine._worker_running import CallRunner
from engine._worker_settles import Written
from engine._worker_snapshot import WorkerState

if TYPE_CHECKING:
    from engine.store._base import Draw, OwnedSettle
    from engine.store._signals import Claimer
    from engine.store.postgres import PostgresStore
    from engine.store.sqlite import SQLiteStore

_CLAIM_ERROR_SLEEP_S = 0.25


def optional_int(value: object, what: str, minimum: int) -> int | None:
    """``value`` checked to be an int >= ``minimum``, or None."""
    return None if value is None else at_least(value, what, minimum)


class ClaimLoop(CallRunner):
    """The poll loop (a base of ``Worker``); its state is set by ``Worker.__init__``."""

    _queues: tuple[str, ...]
    _concurrency: int
    _run_concurrency: int | None
    _poll_ms: int
    _claim_batch: int | None
    _capacities: dict[str, int]
    _sources: tuple[Source, ...]
    _batches: dict[str, int | None]
    _rotation: int
    _polls: int
    _last_poll_ms: int | None
    _claimed_total: int
    _state: WorkerState
    _running: bool
    _stopping: bool
    _paused: bool
    #: Set when run() has returned (drained); close() waits on it.
    _finished: asyncio.Event | None
    #: True while a claim session is on its way (the loop's or a ride's).
    _claiming: bool
    #: The last idle sleep was ended by a claimable-task signal.
    _heard: bool
    #: Whether the last claim after such a signal found work: only then does
    #: the next one skip the store's probe (``claim_session(signalled=True)``).
    #: Signals that announce nothing claimable (a delayed task's insert, an
    #: echo of this process's own commit) thus cost one empty transaction,
    #: then probes again until a signal proves right.
    _trust_signals: bool
    _claimer: Claimer

    @property
    def _limit(self) -> int:
        return self._run_concurrency or self._concurrency

    # -- lifecycle --------------------------------------------------------------------

    async def run(self, *, concurrency: int | None = None) -> None:
        """Claim and run tasks until ``stop()``; then wait for in-flight calls.

        Raises:
            RuntimeError: the worker is already running.
            ValueError: ``concurrency`` < 1.
        """
        if self._running:
            raise RuntimeError("this worker is already running")
        self._run_concurrency = optional_int(concurrency, "concurrency", 1)
        self._running = True
        self._loop = asyncio.get_running_loop()
        self._wakeup = asyncio.Event()
        self._finished = asyncio.Event()
        try:
            await self._store.connect()
            while not self._stopping:
                await self._step()
        finally:
            self._state = "draining"
            try:
                await self._drain_calls()
            finally:
                self._state = "stopped"
                self._threads.release_idle()
                self._running = False
                self._stopping = False
                self._finished.set()
                self._run_concurrency = None

    async def _drain_calls(self) -> None:
        """Wait until no call task is left; a call given up on (``_give_up``) is not
        waited for, even when its handler swallows the cancel: it pokes the wakeup,
        and the tasks are looked at again."""
        assert self._wakeup is not None
        while self._call_tasks:
            self._wakeup.clear()
            poked = asyncio.ensure_future(self._wakeup.wait())
            try:
                done, _ = await asyncio.wait(
                    {*self._call_tasks, poked}, return_when=asyncio.FIRST_COMPLETED
                )
            finally:
                poked.cancel()
            for task in done - {poked}:
                if not task.cancelled():
                    task.exception()  # read, as gathering them did: asyncio stays quiet

    async def _wait_wakeup(self, timeout_s: float | None = None) -> None:
        assert self._wakeup is not None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wakeup.wait(), timeout_s)

    async def _step(self) -> None:
        assert self._wakeup is not None
        self._wakeup.clear()
        if self._paused:
            self._state = "paused"
            await self._wait_wakeup()
            return
        self._state = "running"
        free = self._limit - len(self._calls)
        over_budget = self._max_bytes is not None and self._calls and self._bytes >= self._max_bytes
        # While settlement writes are in flight more slots are about to free:
        # waiting for them turns many one-slot polls into one full poll.
        if free <= 0 or over_budget or self._settling:
            await self._wait_wakeup()
            return
        if not self._registrations:
            await self._idle()
            return
        try:
            again = await self._claim(free)
        except Exception as exc:
            self._report(exc, "claim")
            await self._wait_wakeup(_CLAIM_ERROR_SLEEP_S)
            return
        if not again and not self._wakeup.is_set():
            await self._idle()

    async def _idle(self) -> None:
        """Sleep ``poll_interval_ms``, ended early by a claimable-task signal or a wakeup."""
        assert self._wakeup is not None
        sleeper = asyncio.ensure_future(
            self._store.claim_wake(self._queues, self._poll_ms, claimer=self._claimer)
        )
        waker = asyncio.ensure_future(self._wakeup.wait())
        self._idling = True
        try:
            await asyncio.wait((sleeper, waker), return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._idling = False
            sleeper.cancel()
            waker.cancel()
        if sleeper.done() and not sleeper.cancelled():
            if sleeper.exception() is not None:
                # A failing wakeup (a closed store) shows up in the next claim;
                # here it only ends the sleep early, as the claim error's pause will.
                await self._wait_wakeup(_CLAIM_ERROR_SLEEP_S)
            elif sleeper.result():
                self._heard = True

    async def _claim(self, free: int) -> bool:
        """One claim session; starts the calls it produced.

        Returns:
            Whether to poll again at once: some source got all it asked for or
            was held back by the worker's own limits, so more may be due. When
            every draw came up short the queues are drained for now, and the
            idle sleep (ended by a submit in this process) is the right wait.
        """
        plan = self._plan(free, ())
        heard, self._heard = self._heard, False
        # The rows' leases start no earlier than this: a safe local deadline.
        lease_deadline = time.monotonic() + self._lease_ms / 1000
        self._claiming = True
        try:
            result = await self._store.claim_session(
                queues=self._queues,
                worker_id=self._worker_id,
                lease_ms=self._lease_ms,
                names=list(self._registrations),
                plan=plan,
                signalled=heard and self._trust_signals,
                single_draw=len(self._sources) == 1,
                claimer=self._claimer,
            )
        finally:
            self._claiming = False
        if heard:
            self._trust_signals = result is not None and bool(result.calls)
        return self._polled(result, lease_deadline)

    def _plan(self, free: int, freeing: Sequence[Call]) -> Callable[[Draw], Awaitable[PollResult]]:
        """This poll's plan: ``free`` slots, in-flight state without the ``freeing`` calls."""
        sources = self._sources
        start = self._rotation % len(sources)
        self._rotation += 1
        by_name = {n: s.calls for n, s in self._stats.items()}
        by_resource = dict(self._by_resource)
        for call in freeing:
            by_name[call.name] -= 1
            resource = call.registration.resource
            if resource is not None:
                by_resource[resource] -= 1
        in_flight = InFlight(by_name, by_resource)
        batches = self._batches

        async def plan(draw: Draw) -> PollResult:
            return await plan_poll(
                draw, sources, start, free, in_flight, self._capacities, self._claim_batch, batches
            )

        return plan

    def _polled(self, result: PollResult | None, lease_deadline: float) -> bool:
        """Record a claim session's outcome and start its calls; ``_claim``'s return."""
        self._polls += 1
        self._last_poll_ms = now_ms()
        if result is None:
            for stats in self._stats.values():
                stats.offered, stats.claimed, stats.shortfall = None, 0, "nothing due"
            self._last_dry = True
            return False
        dry = all(o.shortfall == "nothing due" for o in result.outcomes)
        if self._idling and self._last_dry and not dry:
            self._poke()  # a ride's poll while the loop idles: more may be due now
        self._last_dry = dry
        for outcome in result.outcomes:
            for name in outcome.source.names:
                stats = self._stats[name]
                stats.offered = outcome.offered_tasks
                stats.claimed = 0
                stats.shortfall = outcome.shortfall
        for name, tasks in result.calls:
            self._claimed_total += len(tasks)
            if name in self._stats:
                self._stats[name].claimed += len(tasks)
            self._dispatch(name, tasks, lease_deadline)
        return any(
            o.shortfall in ("worker full", "claim batch")
            or (o.offered_tasks > 0 and o.claimed == o.offered_tasks)
            for o in result.outcomes
        )

    async def _claim_completing(
        self, task_ids: list[str], settles: list[OwnedSettle], freeing: list[Call]
    ) -> Written | None:
        """Settle ``task_ids`` and ``settles`` in the claim session refilling the slots they free.

        The ``SettleQueue`` ride hook (stores declaring ``completing_claim``).
        ``freeing`` are the calls whose only settlement write this is: their
        slots count as free for the claim, since the completions and the
        claims commit together, and they are released before the new calls
        start. Declines (None: the caller
        writes the completions alone) when the loop could not claim now
        anyway: not running, stopping, paused, no handlers, a claim already on
        its way, or no slot free even after these calls; and when it would
        find nothing: the loop idles after a poll that found nothing due (a
        task queued since would have woken it), so the probe is spared.

        Returns:
            The ids settled and what became of each of ``settles``, or None if declined.
        """
        # It declared completing_claim: both stores that do share this method.
        store = cast("PostgresStore | SQLiteStore", self._store)
        freeing = [c for c in freeing if c.call_id in self._calls]
        if (
            not freeing
            or not self._running
            or self._stopping
            or self._paused
            or self._claiming
            or not self._registrations
            or (self._idling and self._last_dry)
        ):
            return None
        free = self._limit - len(self._calls) + len(freeing)
        if self._max_bytes is not None:
            remaining = len(self._calls) - len(freeing)
            if remaining and self._bytes - sum(c.bytes for c in freeing) >= self._max_bytes:
                return None
        if free <= 0:
            return None
        plan = self._plan(free, freeing)
        lease_deadline = time.monotonic() + self._lease_ms / 1000
        self._claiming = True
        try:
            outcome = await store.claim_session_completing(
                complete_ids=task_ids,
                queues=self._queues,
                worker_id=self._worker_id,
                lease_ms=self._lease_ms,
                names=list(self._registrations),
                plan=plan,
                single_draw=len(self._sources) == 1,
                settles=settles,
                claimer=self._claimer,
            )
        finally:
            self._claiming = False
        # The completions are durable: their calls end before the new ones start.
        for call in freeing:
            self._release(call)
        if outcome.claim_error is not None:
            self._report(outcome.claim_error, "claim")
        else:
            self._polled(outcome.value, lease_deadline)
        return outcome.settled, outcome.written
