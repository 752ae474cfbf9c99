"""The worker: claims tasks and runs their handlers (the public ``Worker`` class).

What the protocol asks of a worker is in docs/protocol-notes.md, "Worker".

The worker knows concurrency and lifecycle, never SQL, and is built from rooms
of one job each: this module holds the options, registration, controls, the
snapshot and the entry points (``run`` via ``serve``, ``background``, ``close``).
``_worker_loop`` is the claim loop, ``_worker_running`` runs the calls it
claimed, ``_worker_threads`` the ``def`` handlers' threads, ``_worker_plan``
decides how many tasks each name may take on a poll (pure), ``_worker_calls``
invokes handlers and writes what became of them, and ``_worker_snapshot`` holds
the records ``Worker.snapshot()`` returns. A poll is one ``claim_session``
(probe, lease recovery, then a draw per source in one transaction).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import signal
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, overload

from engine._aio import run_to_exit
from engine._gate import QueueGate
from engine._ids import new_worker_id
from engine._models import TaskDef
from engine._rules import at_least, duration_ms
from engine._worker_calls import NameStats
from engine._worker_loop import ClaimLoop, optional_int
from engine._worker_plan import Handler, build_sources, registration_for
from engine._worker_running import OnError
from engine._worker_settles import Settlement, SettleQueue
from engine._worker_snapshot import (
    NameSnapshot,
    ResourceHolder,
    ResourceSnapshot,
    WorkerSnapshot,
)
from engine._worker_threads import HandlerThreads
from engine.store._signals import Claimer

if TYPE_CHECKING:
    from engine.store._base import TaskStore
    from engine.store.sqlite import Synchronous


#: A handler passed through ``Worker.task`` unchanged, its type kept for the caller.
H = TypeVar("H", bound=Callable[..., Any])

_RECENT_REPORTS = 100

log = logging.getLogger("engine.worker")
#: After ``serve`` ends: how long handlers still running get to answer their cancel.
_LEFT_BEHIND_AFTER_S = 1.0


def _checked_queues(queues: object) -> tuple[str, ...]:
    """``queues`` as a tuple of queue names.

    Raises:
        ValueError: not a non-empty list of non-empty strings.
    """
    if isinstance(queues, str) or not isinstance(queues, Sequence) or not queues:
        raise ValueError(f"queues must be a non-empty list of queue names, got {queues!r}")
    for queue in queues:
        if not isinstance(queue, str) or not queue:
            raise ValueError(f"queue names must be non-empty strings, got {queue!r}")
    return tuple(queues)


# -- the worker --------------------------------------------------------------------------


class Worker(ClaimLoop):
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
        self._store = store
        self._queues = _checked_queues(queues)
        self._concurrency = at_least(concurrency, "concurrency", 1)
        self._lease_ms = duration_ms(lease_ms, "lease_ms", minimum=1)
        beat = optional_int(heartbeat_interval_ms, "heartbeat_interval_ms", 1)
        self._heartbeat_ms = beat if beat is not None else max(50, lease_ms // 3)
        self._poll_ms = at_least(poll_interval_ms, "poll_interval_ms", 0)
        self._claim_batch = optional_int(claim_batch, "claim_batch", 1)
        self._backoff_ms = at_least(retry_backoff_ms, "retry_backoff_ms", 0)
        self._backoff_max_ms = at_least(retry_backoff_max_ms, "retry_backoff_max_ms", 0)
        self._max_run_ms = optional_int(max_run_ms, "max_run_ms", 1)
        self._max_bytes = optional_int(max_in_flight_bytes, "max_in_flight_bytes", 1)
        self._capacities: dict[str, int] = {}
        for resource, capacity in (resources or {}).items():
            if not isinstance(resource, str) or not resource:
                raise ValueError(f"resource names must be non-empty strings, got {resource!r}")
            self._capacities[resource] = at_least(capacity, f"resources[{resource!r}]", 1)
        if max_queue_depth is not None:
            store._set_queue_gate(QueueGate(max_queue_depth, max_queue_wait_ms))
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
            queue=SettleQueue(store, self._worker_id, ride),
        )

        self._registrations = {}
        self._sources = ()
        self._batches = {}
        self._rotation = 0
        self._stats = {}
        self._calls = {}
        self._call_tasks = set()
        self._in_handler = {}
        self._giving_up = False
        self._call_ids = itertools.count(1)
        self._by_resource: dict[str, int] = {}
        self._bytes = 0
        # Calls whose handler returned and whose settlement writes are in flight.
        self._settling = 0
        self._errors = deque(maxlen=_RECENT_REPORTS)
        self._failures = deque(maxlen=_RECENT_REPORTS)
        self._polls = 0
        self._last_poll_ms = None
        self._claimed_total = 0
        # Plain-function handlers run here, never on the loop's default executor.
        self._threads = HandlerThreads(lambda: self._limit)

        self._state = "stopped"
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
        self._heard = False
        self._idling = False
        self._last_dry = False
        self._trust_signals = True
        # What this worker's claims have looked at: a "queued" signal since its
        # last claim began fires its next claim wake, whoever else it woke.
        self._claimer = Claimer()

    # -- construction with an owned store -------------------------------------------

    @classmethod
    def sqlite(
        cls,
        path: str,
        queues: Sequence[str] = ("default",),
        *,
        concurrency: int = 1,
        lease_ms: int = 30_000,
        busy_timeout_ms: int = 5_000,
        synchronous: Synchronous = "full",
        **kwargs: Any,
    ) -> Worker:
        """A worker with a ``SQLiteStore`` of its own, closed when the worker is done.

        "Done" is the end of ``serve``, of a ``background`` block, or ``close()``.
        ``queues`` may come second, as in ``Worker(store, queues)`` (the cairnq
        SDK takes it by keyword only: ``queues=[...]`` works with both). Other
        keyword arguments are ``Worker``'s. ``synchronous="normal"`` trades
        durability for speed: an OS crash or power loss can drop acknowledged
        commits (see ``SQLiteStore``).

        Raises:
            ValueError: a bad option (checked before the store is made).
        """
        from engine.store.sqlite import SQLiteStore

        queues = _checked_queues(queues)
        own = SQLiteStore(path, busy_timeout_ms=busy_timeout_ms, synchronous=synchronous)
        return cls._over(own, queues, dict(kwargs, concurrency=concurrency, lease_ms=lease_ms))

    @classmethod
    def postgres(
        cls,
        dsn: str,
        queues: Sequence[str] = ("default",),
        *,
        concurrency: int = 1,
        lease_ms: int = 30_000,
        min_size: int = 1,
        max_size: int = 10,
        schema: str | None = None,
        **kwargs: Any,
    ) -> Worker:
        """A worker with a ``PostgresStore`` (pool and schema) of its own; see ``sqlite``."""
        from engine.store.postgres import PostgresStore

        queues = _checked_queues(queues)
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

    # -- reporting ---------------------------------------------------------------------

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

        The first signal stops claiming and lets the calls in flight finish; a
        second one gives up on those still in their handler (``_stop_now``). A
        handler that swallows its cancellation is left behind once ``serve`` is
        done (after ``_LEFT_BEHIND_AFTER_S``), so it cannot keep the process alive.
        Only ``serve`` owns the process, so only ``serve`` touches signal
        handlers; ``run`` and ``background`` leave them to their host.
        """
        left = run_to_exit(self._serve(concurrency), grace_s=_LEFT_BEHIND_AFTER_S)
        if left:
            log.warning(
                "%d handler(s) ignored their cancellation; exiting without them (their"
                " tasks stay running until their leases end, then are recovered)",
                left,
            )

    async def _serve(self, concurrency: int | None) -> None:
        loop = asyncio.get_running_loop()
        hooked: list[signal.Signals] = []
        signals = 0

        def on_signal(signum: signal.Signals) -> None:
            # The first signal stops warm (drain), the next one cold (_stop_now).
            nonlocal signals
            signals += 1
            if signals > 1:
                self._stop_now()
                return
            self.stop()
            if self._calls:
                log.warning(
                    "%s: stopping, %d call(s) in flight; send the signal again to stop at"
                    " once (their tasks stay running until their leases end, then are"
                    " recovered)",
                    signum.name,
                    len(self._calls),
                )

        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                with contextlib.suppress(NotImplementedError, RuntimeError):
                    loop.add_signal_handler(signum, on_signal, signum)
                    hooked.append(signum)
        try:
            await self.run(concurrency=concurrency)
        finally:
            self._giving_up = False
            for signum in hooked:
                loop.remove_signal_handler(signum)
            if self._closes_store:
                await self._store.close()

    def _stop_now(self) -> None:
        """Stop without waiting for handlers: the calls still in one are given up on.

        Their tasks stay ``running`` until their leases end (lease recovery
        takes them); settlement writes already under way still finish, so
        ``run`` returns as soon as those do. ``serve``'s second signal.
        """
        self.stop()
        self._give_up_handlers()

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
