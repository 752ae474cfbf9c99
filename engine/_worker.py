"""The worker: the run loop that claims tasks and drives their calls.

What the protocol asks of a worker is in docs/protocol-notes.md, "Worker".

The loop knows concurrency and lifecycle, never SQL. Its parts live beside it:
``_worker_plan`` decides how many tasks each name may take on a poll (pure),
``_worker_calls`` invokes handlers and writes what became of them, and
``_worker_snapshot`` holds the records ``Worker.snapshot()`` returns. A poll is
one ``claim_session`` (probe, lease recovery, then a draw per source in one
transaction); on a store that declares ``completing_claim`` the completions
that free slots ride along with the claim that refills them.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import itertools
import signal
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast, overload

from engine import _envelopes as envelopes
from engine._clock import now_ms
from engine._context import TaskContext
from engine._errors import LostLease, TaskError
from engine._gate import QueueGate
from engine._ids import new_worker_id
from engine._models import Task, TaskDef
from engine._rules import at_least, duration_ms
from engine._worker_calls import (
    Call,
    Completions,
    NameStats,
    Settlement,
    invoke,
    leftovers,
    renew_leases,
)
from engine._worker_plan import (
    Handler,
    InFlight,
    PollResult,
    Registration,
    Source,
    build_sources,
    payload_bytes,
    plan_poll,
    registration_for,
)
from engine._worker_snapshot import (
    ErrorReport,
    NameSnapshot,
    ResourceHolder,
    ResourceSnapshot,
    WorkerSnapshot,
    WorkerState,
    report_of,
)
from engine._worker_threads import HandlerThreads

if TYPE_CHECKING:
    from engine.store._base import Draw, TaskStore
    from engine.store.postgres import PostgresStore
    from engine.store.sqlite import SQLiteStore, Synchronous


#: A handler passed through ``Worker.task`` unchanged, its type kept for the caller.
H = TypeVar("H", bound=Callable[..., Any])
OnError = Callable[[BaseException, dict[str, Any]], Any]

_CLAIM_ERROR_SLEEP_S = 0.25
_RECENT_REPORTS = 100


def _optional_int(value: object, what: str, minimum: int) -> int | None:
    return None if value is None else at_least(value, what, minimum)


# -- the worker --------------------------------------------------------------------------


class Worker:
    """Claims tasks from ``queues`` and runs their handlers.

    Args:
        store: the database (the worker does not close it unless it owns it).
        queues: queue names to claim from.
        concurrency: handler calls at once (a batch call counts once).
        lease_ms: lease per claimed task, renewed by a heartbeat loop per call.
        heartbeat_interval_ms: beat period; default ``max(50, lease_ms // 3)``.
        poll_interval_ms: idle sleep between empty polls (in-process submits and
            Postgres notifications end it early).
        claim_batch: most rows per draw (never below one call of a name's batch).
        retry_backoff_ms / retry_backoff_max_ms: equal-jitter backoff base and cap.
        max_run_ms: wall-clock ceiling per call; the attempt is then abandoned
            and failed (retryable) as ``handler_timeout``.
        max_in_flight_bytes: budget on the summed payload sizes of calls in flight.
        resources: ``{name: capacity}``; names joining one share its capacity.
        max_queue_depth / max_queue_wait_ms: a backpressure gate on the store, so
            child submits from handlers wait for headroom too.
        on_error: ``on_error(exc, info)`` for errors the worker survives.

    Raises:
        ValueError: an option out of range (nothing is started).
    """

    def __init__(
        self,
        store: TaskStore,
        queues: Sequence[str],
        *,
        concurrency: int = 1,
        lease_ms: int = 30_000,
        heartbeat_interval_ms: int | None = None,
        poll_interval_ms: int = 500,
        claim_batch: int | None = None,
        retry_backoff_ms: int = 1_000,
        retry_backoff_max_ms: int = 30_000,
        max_run_ms: int | None = None,
        max_in_flight_bytes: int | None = None,
        resources: Mapping[str, int] | None = None,
        max_queue_depth: int | Mapping[str, int] | None = None,
        max_queue_wait_ms: int = 600_000,
        on_error: OnError | None = None,
    ) -> None:
        if isinstance(queues, str) or not isinstance(queues, Sequence) or not queues:
            raise ValueError("queues must be a non-empty list of queue names")
        for queue in queues:
            if not isinstance(queue, str) or not queue:
                raise ValueError(f"queue names must be non-empty strings, got {queue!r}")
        self._store = store
        self._queues = tuple(queues)
        self._concurrency = at_least(concurrency, "concurrency", 1)
        self._lease_ms = duration_ms(lease_ms, "lease_ms", minimum=1)
        beat = _optional_int(heartbeat_interval_ms, "heartbeat_interval_ms", 1)
        self._heartbeat_ms = beat if beat is not None else max(50, lease_ms // 3)
        self._poll_ms = at_least(poll_interval_ms, "poll_interval_ms", 0)
        self._claim_batch = _optional_int(claim_batch, "claim_batch", 1)
        self._backoff_ms = at_least(retry_backoff_ms, "retry_backoff_ms", 0)
        self._backoff_max_ms = at_least(retry_backoff_max_ms, "retry_backoff_max_ms", 0)
        self._max_run_ms = _optional_int(max_run_ms, "max_run_ms", 1)
        self._max_bytes = _optional_int(max_in_flight_bytes, "max_in_flight_bytes", 1)
        self._capacities: dict[str, int] = {}
        for resource, capacity in (resources or {}).items():
            if not isinstance(resource, str) or not resource:
                raise ValueError(f"resource names must be non-empty strings, got {resource!r}")
            self._capacities[resource] = at_least(capacity, f"resources[{resource!r}]", 1)
        if max_queue_depth is not None:
            store.set_queue_gate(QueueGate(max_queue_depth, max_queue_wait_ms))
        self._on_error = on_error
        self._worker_id = new_worker_id()
        # Set by Worker.sqlite / Worker.postgres: the store was made for this
        # worker, so its exits (serve, background, close) close it too.
        self._closes_store = False
        # Where the store can, a completion that frees a slot commits in the
        # same transaction as the claim that fills it again.
        ride = self._claim_completing if store.capabilities.completing_claim else None
        self._settlement = Settlement(
            store,
            self._worker_id,
            backoff_ms=self._backoff_ms,
            backoff_max_ms=self._backoff_max_ms,
            report=self._report,
            completions=Completions(store, self._worker_id, ride),
        )

        self._registrations: dict[str, Registration] = {}
        self._sources: tuple[Source, ...] = ()
        self._batches: dict[str, int | None] = {}
        self._rotation = 0
        self._stats: dict[str, NameStats] = {}
        self._calls: dict[int, Call] = {}
        self._call_tasks: set[asyncio.Task[None]] = set()
        self._call_ids = itertools.count(1)
        self._by_resource: dict[str, int] = {}
        self._bytes = 0
        # Calls whose handler returned and whose settlement writes are in flight.
        self._settling = 0
        self._errors: deque[ErrorReport] = deque(maxlen=_RECENT_REPORTS)
        self._failures: deque[ErrorReport] = deque(maxlen=_RECENT_REPORTS)
        self._polls = 0
        self._last_poll_ms: int | None = None
        self._claimed_total = 0
        # Plain-function handlers run here, never on the loop's default executor.
        self._threads = HandlerThreads(lambda: self._limit)

        self._state: WorkerState = "stopped"
        self._running = False
        self._stopping = False
        self._paused = False
        self._run_concurrency: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        # Set by anything that should end an idle or full wait early: a call
        # ending, a released resource unit, stop, resume, a new registration.
        self._wakeup: asyncio.Event | None = None
        # Set when run() has returned (drained); close() waits on it.
        self._finished: asyncio.Event | None = None
        # True while a claim session is on its way (the loop's or a ride's).
        self._claiming = False

    # -- construction with an owned store -------------------------------------------

    @classmethod
    def sqlite(
        cls,
        path: str,
        *,
        queues: Sequence[str] = ("default",),
        concurrency: int = 1,
        lease_ms: int = 30_000,
        busy_timeout_ms: int = 5_000,
        synchronous: Synchronous = "full",
        **kwargs: Any,
    ) -> Worker:
        """A worker with a ``SQLiteStore`` of its own, closed when the worker is done.

        "Done" is the end of ``serve``, of a ``background`` block, or ``close()``.
        Other keyword arguments are ``Worker``'s. ``synchronous="normal"`` trades
        durability for speed: an OS crash or power loss can drop acknowledged
        commits (see ``SQLiteStore``).
        """
        from engine.store.sqlite import SQLiteStore

        own = SQLiteStore(path, busy_timeout_ms=busy_timeout_ms, synchronous=synchronous)
        return cls._over(own, queues, dict(kwargs, concurrency=concurrency, lease_ms=lease_ms))

    @classmethod
    def postgres(
        cls,
        dsn: str,
        *,
        queues: Sequence[str] = ("default",),
        concurrency: int = 1,
        lease_ms: int = 30_000,
        min_size: int = 1,
        max_size: int = 10,
        schema: str | None = None,
        **kwargs: Any,
    ) -> Worker:
        """A worker with a ``PostgresStore`` (pool and schema) of its own; see ``sqlite``."""
        from engine.store.postgres import PostgresStore

        own = PostgresStore(dsn, min_size=min_size, max_size=max_size, schema=schema)
        return cls._over(own, queues, dict(kwargs, concurrency=concurrency, lease_ms=lease_ms))

    @classmethod
    def _over(cls, store: TaskStore, queues: Sequence[str], options: dict[str, Any]) -> Worker:
        """A worker on ``store``, which it closes when it is done with it."""
        worker = cls(store, queues, **options)
        worker._closes_store = True
        return worker

    @property
    def worker_id(self) -> str:
        """``worker_`` + ULID, new for every worker instance."""
        return self._worker_id

    @property
    def store(self) -> TaskStore:
        return self._store

    # -- registration -------------------------------------------------------------------

    @overload
    def task(
        self,
        name: H,
        *,
        batch: int | None = None,
        concurrency: int | None = None,
        resource: str | None = None,
    ) -> H: ...

    @overload
    def task(
        self,
        name: str | TaskDef[Any, Any] | None = None,
        *,
        batch: int | None = None,
        concurrency: int | None = None,
        resource: str | None = None,
    ) -> Callable[[H], H]: ...

    def task(
        self,
        name: str | TaskDef[Any, Any] | Handler | None = None,
        *,
        batch: int | None = None,
        concurrency: int | None = None,
        resource: str | None = None,
    ) -> Any:
        """Register a handler by decorator: ``@w.task``, ``@w.task("x.y")``, ``@w.task(Def)``.

        Returns:
            The handler unchanged (or a decorator returning it).
        """
        if callable(name) and not isinstance(name, TaskDef):
            fn = name
            self.register(None, fn, batch=batch, concurrency=concurrency, resource=resource)
            return fn

        def decorator(fn: Handler) -> Handler:
            self.register(name, fn, batch=batch, concurrency=concurrency, resource=resource)
            return fn

        return decorator

    def register(
        self,
        name: str | TaskDef[Any, Any] | None,
        fn: Handler,
        *,
        batch: int | None = None,
        concurrency: int | None = None,
        resource: str | None = None,
    ) -> None:
        """Register ``fn`` for ``name`` (its function name when None); re-registering replaces.

        Raises:
            ValueError: no usable name, ``batch``/``concurrency`` < 1, or a
                resource the worker did not declare.
        """
        registration = registration_for(
            name,
            fn,
            batch=batch,
            concurrency=concurrency,
            resource=resource,
            declared=self._capacities,
        )
        name = registration.name
        self._registrations[name] = registration
        self._stats.setdefault(name, NameStats())
        self._sources = build_sources(self._registrations)
        self._batches = {n: r.batch for n, r in self._registrations.items()}
        self._poke()

    # -- control (safe from any thread) ------------------------------------------------

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

    def stop(self) -> None:
        """Ask ``run`` to stop claiming and return once in-flight calls finish."""
        self._stopping = True
        self._poke()

    def pause(self) -> None:
        """Stop claiming; calls in flight continue (ours)."""
        self._paused = True
        self._poke()

    def resume(self) -> None:
        """Resume claiming after ``pause`` (ours)."""
        self._paused = False
        self._poke()

    def set_concurrency(self, concurrency: int) -> None:
        """Change the limit on calls in flight, taking effect on the next poll (ours).

        Raises:
            ValueError: ``concurrency`` < 1.
        """
        self._concurrency = at_least(concurrency, "concurrency", 1)
        self._run_concurrency = None
        self._poke()

    @property
    def _limit(self) -> int:
        return self._run_concurrency or self._concurrency

    # -- reporting ---------------------------------------------------------------------

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

    def snapshot(self) -> WorkerSnapshot:
        """The worker's state now, cheap enough for every console refresh (no I/O)."""
        calls = list(self._calls.values())
        names = tuple(
            NameSnapshot(
                name=reg.name,
                batch=reg.batch,
                concurrency=reg.concurrency,
                resource=reg.resource,
                calls_in_flight=self._stats[reg.name].calls,
                tasks_in_flight=self._stats[reg.name].tasks,
                offered=self._stats[reg.name].offered,
                claimed=self._stats[reg.name].claimed,
                shortfall=self._stats[reg.name].shortfall,
            )
            for reg in list(self._registrations.values())
        )
        resources = tuple(
            ResourceSnapshot(
                name=resource,
                capacity=capacity,
                held=self._by_resource.get(resource, 0),
                holders=tuple(
                    ResourceHolder(
                        c.call_id, c.name, tuple(x.task_id for x in c.contexts), c.started_at_ms
                    )
                    for c in calls
                    if c.registration.resource == resource
                ),
            )
            for resource, capacity in self._capacities.items()
        )
        return WorkerSnapshot(
            worker_id=self._worker_id,
            queues=self._queues,
            state=self._state,
            concurrency_used=len(calls),
            concurrency_limit=self._limit,
            bytes_in_flight=self._bytes,
            max_in_flight_bytes=self._max_bytes,
            lease_ms=self._lease_ms,
            polls=self._polls,
            last_poll_at_ms=self._last_poll_ms,
            tasks_claimed=self._claimed_total,
            names=names,
            resources=resources,
            calls=tuple(c.snapshot() for c in calls),
            recent_errors=tuple(self._errors),
            recent_failures=tuple(self._failures),
            abandoned_threads=self._threads.abandoned(),
            abandoned_total=self._threads.abandoned_total,
        )

    # -- lifecycle --------------------------------------------------------------------

    async def run(self, *, concurrency: int | None = None) -> None:
        """Claim and run tasks until ``stop()``; then wait for in-flight calls.

        Raises:
            RuntimeError: the worker is already running.
            ValueError: ``concurrency`` < 1.
        """
        if self._running:
            raise RuntimeError("this worker is already running")
        self._run_concurrency = _optional_int(concurrency, "concurrency", 1)
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
                while self._call_tasks:
                    await asyncio.gather(*list(self._call_tasks), return_exceptions=True)
            finally:
                self._state = "stopped"
                self._threads.release_idle()
                self._running = False
                self._stopping = False
                self._finished.set()
                self._run_concurrency = None

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
        sleeper = asyncio.ensure_future(self._store.claim_wake(self._queues, self._poll_ms))
        waker = asyncio.ensure_future(self._wakeup.wait())
        try:
            await asyncio.wait((sleeper, waker), return_when=asyncio.FIRST_COMPLETED)
        finally:
            sleeper.cancel()
            waker.cancel()
        if sleeper.done() and not sleeper.cancelled() and sleeper.exception() is not None:
            # A failing wakeup (a closed store) shows up in the next claim;
            # here it only ends the sleep early, as the claim error's pause will.
            await self._wait_wakeup(_CLAIM_ERROR_SLEEP_S)

    async def _claim(self, free: int) -> bool:
        """One claim session; starts the calls it produced.

        Returns:
            Whether to poll again at once: some source got all it asked for or
            was held back by the worker's own limits, so more may be due. When
            every draw came up short the queues are drained for now, and the
            idle sleep (ended by a submit in this process) is the right wait.
        """
        plan = self._plan(free, ())
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
            )
        finally:
            self._claiming = False
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
            return False
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

    async def _claim_completing(self, task_ids: list[str], freeing: list[Call]) -> set[str] | None:
        """Complete ``task_ids`` in the claim session that refills the slots they free.

        The ``Completions`` ride hook (stores declaring ``completing_claim``).
        ``freeing`` are the calls whose only settlement write this is: their
        slots count as free for the claim, since the completions and the
        claims commit together, and they are released before the new calls
        start. Declines (None: the caller
        writes the completions alone) when the loop could not claim now
        anyway: not running, stopping, paused, no handlers, a claim already on
        its way, or no slot free even after these calls.

        Returns:
            The ids settled, or None if declined.
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
        settled: set[str] = outcome.settled
        return settled

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
        self._spawn(self._run_call(call))

    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._call_tasks.add(task)
        task.add_done_callback(self._call_tasks.discard)

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
        self._poke()

    # -- one call ----------------------------------------------------------------------

    async def _run_call(self, call: Call) -> None:
        self._arm_heartbeat(call)
        settle: Awaitable[None] | None = None
        try:
            if self._max_run_ms is None:
                outcome: Any = await invoke(call, self._threads)
            else:
                handler = asyncio.ensure_future(invoke(call, self._threads))
                done, _ = await asyncio.wait((handler,), timeout=self._max_run_ms / 1000)
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
                    self._poke()

    def _record_failure(self, call: Call, exc: BaseException) -> None:
        self._failures.append(report_of(exc, f"handler {call.name}", call.contexts[0].task_id))

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
                TimeoutError(envelope["message"]), f"handler {call.name}", call.contexts[0].task_id
            )
        )
        await asyncio.gather(*(self._settlement.fail(c, envelope, True) for c in unsettled))

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

    # -- entry points ---------------------------------------------------------------------

    async def close(self) -> None:
        """Stop, wait for a run on this loop to drain, and close an owned store."""
        self.stop()
        finished = self._finished
        if self._running and finished is not None and self._loop is asyncio.get_running_loop():
            await finished.wait()
        if self._closes_store:
            await self._store.close()

    def serve(self, *, concurrency: int | None = None) -> None:
        """Run until SIGINT or SIGTERM (blocking), then close an owned store.

        Only ``serve`` owns the process, so only ``serve`` touches signal
        handlers; ``run`` and ``background`` leave them to their host.
        """
        asyncio.run(self._serve(concurrency))

    async def _serve(self, concurrency: int | None) -> None:
        loop = asyncio.get_running_loop()
        hooked: list[signal.Signals] = []
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                with contextlib.suppress(NotImplementedError, RuntimeError):
                    loop.add_signal_handler(signum, self.stop)
                    hooked.append(signum)
        try:
            await self.run(concurrency=concurrency)
        finally:
            for signum in hooked:
                loop.remove_signal_handler(signum)
            if self._closes_store:
                await self._store.close()

    @contextlib.asynccontextmanager
    async def background(self, *, concurrency: int | None = None) -> AsyncIterator[Worker]:
        """Run the worker as a task for the duration of an ``async with`` block.

        On exit it stops, drains in-flight calls and closes an owned store. A
        failed ``run()`` is re-raised (if the body raised too, the body's error
        wins and the run's failure becomes its ``__cause__``).
        """
        run = asyncio.ensure_future(self.run(concurrency=concurrency))
        body_failed = False
        try:
            yield self
        except BaseException as body_error:
            body_failed = True
            run_error = await self._wind_down(run)
            if run_error is not None and body_error.__cause__ is None:
                body_error.__cause__ = run_error
            raise
        finally:
            if not body_failed:
                run_error = await self._wind_down(run)
                if run_error is not None:
                    raise run_error

    async def _wind_down(self, run: asyncio.Future[None]) -> BaseException | None:
        """Stop, let ``run`` drain, close an owned store; what ``run`` failed with, if anything."""
        self.stop()
        (ended,) = await asyncio.gather(run, return_exceptions=True)
        if self._closes_store:
            with contextlib.suppress(Exception):
                await self._store.close()
        if isinstance(ended, BaseException) and not isinstance(ended, asyncio.CancelledError):
            return ended
        return None


def _consume_outcome(future: asyncio.Future[Any]) -> None:
    """Done callback for a future nobody awaits: its exception is read, so asyncio stays quiet."""
    if not future.cancelled():
        future.exception()
