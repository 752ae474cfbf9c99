"""The worker runtime (PROTOCOL.md §5): claim sessions with per-name quotas, calls,
leases, settlement, budgets, and a snapshot of all of it for the console.

The run loop knows concurrency and lifecycle, never SQL: it talks to the store
through ``claim_session`` (one probe, one recovery, then a draw per source inside
one transaction), ``heartbeat_batch``, ``complete`` and ``fail``. Quota planning
is a pure function of the worker's in-flight state (``plan_poll``), so what a poll
offered each name, and why it got less, is recorded for ``Worker.snapshot()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import itertools
import signal
import threading
import time
import traceback
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

import orjson

from engine._backoff import retry_delay_ms
from engine._clock import now_ms
from engine._context import TaskContext
from engine._errors import LostLease, SerializationError, StoreUnavailable, TaskError
from engine._gate import QueueGate
from engine._ids import new_worker_id
from engine._models import Task, TaskDef
from engine._rules import at_least, duration_ms

if TYPE_CHECKING:
    from engine.store._base import Draw, TaskStore

Handler = Callable[..., Any]
#: A handler passed through ``Worker.task`` unchanged, its type kept for the caller.
H = TypeVar("H", bound=Callable[..., Any])
OnError = Callable[[BaseException, dict[str, Any]], Any]
WorkerState = Literal["running", "paused", "draining", "stopped"]
#: Why a name got fewer tasks than it was offered on the last poll.
Shortfall = Literal["worker full", "own cap", "resource saturated", "claim batch", "nothing due"]

_CLAIM_ERROR_SLEEP_S = 0.25
_RECENT_REPORTS = 100


def _optional_int(value: object, what: str, minimum: int) -> int | None:
    return None if value is None else at_least(value, what, minimum)


# -- snapshots (ours: what the console shows) ----------------------------------------


@dataclass(frozen=True, slots=True)
class ErrorReport:
    """One error the worker survived (``on_error``) or one handler failure."""

    at_ms: int
    phase: str
    task_id: str | None
    exception_type: str
    message: str
    traceback: str


@dataclass(frozen=True, slots=True)
class NameSnapshot:
    """A registered name: its limits, what it runs, and how the last poll treated it.

    ``offered`` is the quota in tasks the last poll offered (None before any
    poll reached it), ``claimed`` what it got, ``shortfall`` why it got less or
    was held back: "worker full", "own cap", "resource saturated", "claim batch"
    or "nothing due" (None when nothing limited it).
    """

    name: str
    batch: int | None
    concurrency: int | None
    resource: str | None
    calls_in_flight: int
    tasks_in_flight: int
    offered: int | None
    claimed: int
    shortfall: Shortfall | None


@dataclass(frozen=True, slots=True)
class ResourceHolder:
    """A call holding one unit of a resource."""

    call_id: int
    name: str
    task_ids: tuple[str, ...]
    started_at_ms: int


@dataclass(frozen=True, slots=True)
class ResourceSnapshot:
    """A declared resource: capacity, units held, and by which calls."""

    name: str
    capacity: int
    held: int
    holders: tuple[ResourceHolder, ...]


@dataclass(frozen=True, slots=True)
class CallTaskSnapshot:
    """One task inside an in-flight call."""

    task_id: str
    attempt: int
    settled: bool
    lost: bool
    cancel_requested: bool
    progress: float | None
    message: str | None


@dataclass(frozen=True, slots=True)
class CallSnapshot:
    """One handler call in flight (a batch call carries several tasks)."""

    call_id: int
    name: str
    task_ids: tuple[str, ...]
    started_at_ms: int
    lease_until_ms: int | None
    last_heartbeat_ms: int | None
    lost: bool
    settled: bool
    cancel_requested: bool
    bytes: int
    tasks: tuple[CallTaskSnapshot, ...]


@dataclass(frozen=True, slots=True)
class WorkerSnapshot:
    """The worker's state at one instant, read without any database round trip."""

    worker_id: str
    queues: tuple[str, ...]
    state: WorkerState
    concurrency_used: int
    concurrency_limit: int
    bytes_in_flight: int
    max_in_flight_bytes: int | None
    lease_ms: int
    polls: int
    last_poll_at_ms: int | None
    tasks_claimed: int
    names: tuple[NameSnapshot, ...]
    resources: tuple[ResourceSnapshot, ...]
    calls: tuple[CallSnapshot, ...]
    recent_errors: tuple[ErrorReport, ...]
    recent_failures: tuple[ErrorReport, ...]


# -- registrations and quota planning --------------------------------------------------


def _wants_payload(fn: Handler) -> bool:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return True
    kinds = inspect.Parameter
    positional = [
        p for p in params if p.kind in (kinds.POSITIONAL_ONLY, kinds.POSITIONAL_OR_KEYWORD)
    ]
    return len(positional) >= 2 or any(p.kind is kinds.VAR_POSITIONAL for p in params)


def _is_async(fn: Handler) -> bool:
    if inspect.iscoroutinefunction(fn):
        return True
    # A callable object is a handler too; its asyncness lives on __call__.
    return inspect.iscoroutinefunction(type(fn).__call__)


@dataclass(frozen=True, slots=True)
class Registration:
    """A handler and its limits, decided once at registration."""

    name: str
    fn: Handler
    batch: int | None
    concurrency: int | None
    resource: str | None
    is_async: bool
    wants_payload: bool

    @property
    def draws_alone(self) -> bool:
        return self.batch is not None or self.concurrency is not None or self.resource is not None


@dataclass(frozen=True, slots=True)
class Source:
    """What one draw takes: a name drawing alone, or the names sharing a draw."""

    names: tuple[str, ...]
    batch: int
    concurrency: int | None
    resource: str | None


def build_sources(registrations: Mapping[str, Registration]) -> tuple[Source, ...]:
    """Names with batch, resource or their own concurrency draw alone; the rest share one."""
    alone = [
        Source((r.name,), r.batch or 1, r.concurrency, r.resource)
        for r in registrations.values()
        if r.draws_alone
    ]
    shared = tuple(r.name for r in registrations.values() if not r.draws_alone)
    return tuple(alone) + ((Source(shared, 1, None, None),) if shared else ())


@dataclass(frozen=True, slots=True)
class InFlight:
    """The slice of in-flight state quota planning reads."""

    calls_by_name: Mapping[str, int]
    calls_by_resource: Mapping[str, int]


@dataclass(frozen=True, slots=True)
class SourceQuota:
    """A source's quota for one poll: calls it may start and what bound it."""

    calls: int
    bound: Shortfall | None


def source_quota(
    source: Source,
    left: int,
    in_flight: InFlight,
    tally: Mapping[str, int],
    capacities: Mapping[str, int],
    claim_batch: int | None,
) -> SourceQuota:
    """The tightest applicable ceiling on a source's calls this poll (§5.3)."""
    if left <= 0:
        return SourceQuota(0, "worker full")
    quota, bound = left, None
    ceilings: list[tuple[int, Shortfall]] = []
    if source.concurrency is not None:
        own = source.concurrency - sum(in_flight.calls_by_name.get(n, 0) for n in source.names)
        ceilings.append((own, "own cap"))
    if source.resource is not None:
        free = (
            capacities[source.resource]
            - in_flight.calls_by_resource.get(source.resource, 0)
            - tally.get(source.resource, 0)
        )
        ceilings.append((free, "resource saturated"))
    if claim_batch is not None:
        ceilings.append((max(1, claim_batch // source.batch), "claim batch"))
    for ceiling, why in ceilings:
        if ceiling < quota:
            quota, bound = ceiling, why
    if bound is None and quota == left:
        bound = "worker full"  # the worker's free slots were the binding limit
    return SourceQuota(max(0, quota), bound)


@dataclass(frozen=True, slots=True)
class SourceOutcome:
    """What one source was offered and got on a poll."""

    source: Source
    offered_tasks: int
    claimed: int
    shortfall: Shortfall | None


@dataclass(slots=True)
class PollResult:
    """A claim session's plan output: calls to start and per-source accounting."""

    calls: list[tuple[str, list[Task]]]
    outcomes: list[SourceOutcome]


def split_calls(
    rows: Sequence[Task], batches: Mapping[str, int | None]
) -> list[tuple[str, list[Task]]]:
    """Group rows by name and chunk them by that name's batch (unbatched: one per call)."""
    by_name: dict[str, list[Task]] = {}
    for row in rows:
        by_name.setdefault(row.name, []).append(row)
    calls: list[tuple[str, list[Task]]] = []
    for name, tasks in by_name.items():
        size = batches.get(name) or 1
        calls.extend((name, tasks[i : i + size]) for i in range(0, len(tasks), size))
    return calls


async def plan_poll(
    draw: Draw,
    sources: Sequence[Source],
    start: int,
    free: int,
    in_flight: InFlight,
    capacities: Mapping[str, int],
    claim_batch: int | None,
    batches: Mapping[str, int | None],
) -> PollResult:
    """One poll's draws, rotating the starting source (§5.3).

    Pure apart from ``draw``: it reads a snapshot of in-flight state and returns
    what to run, so a store may re-run it when it retries its transaction.
    """
    left = free
    tally: dict[str, int] = {}
    result = PollResult([], [])
    count = len(sources)
    for i in range(count):
        source = sources[(start + i) % count]
        quota = source_quota(source, left, in_flight, tally, capacities, claim_batch)
        if quota.calls <= 0:
            result.outcomes.append(SourceOutcome(source, 0, 0, quota.bound))
            continue
        wanted = quota.calls * source.batch
        rows = await draw(list(source.names), wanted)
        calls = split_calls(rows, batches)
        left -= len(calls)
        if source.resource is not None:
            tally[source.resource] = tally.get(source.resource, 0) + len(calls)
        shortfall = "nothing due" if len(rows) < wanted else quota.bound
        result.outcomes.append(SourceOutcome(source, wanted, len(rows), shortfall))
        result.calls.extend(calls)
    return result


def payload_bytes(payload: Any) -> int:
    """UTF-8 length of the payload's compact JSON (non-ASCII unescaped); 0 if unmeasurable."""
    try:
        return len(orjson.dumps(payload))
    except (TypeError, orjson.JSONEncodeError):
        return 0


# -- calls ----------------------------------------------------------------------


class _Call:
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
        return [c for c in self.contexts if not c.settled and not c.lost_lease]

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
class _NameStats:
    calls: int = 0
    tasks: int = 0
    offered: int | None = None
    claimed: int = 0
    shortfall: Shortfall | None = None


def _timeout_envelope(name: str, max_run_ms: int) -> dict[str, Any]:
    return {
        "type": "HandlerTimeout",
        "code": "handler_timeout",
        "message": f"handler for {name!r} exceeded max_run_ms={max_run_ms}ms; "
        "the attempt was abandoned",
        "retryable": True,
        "details": {},
    }


def _no_handler_envelope(name: str) -> dict[str, Any]:
    return {
        "type": "NoHandler",
        "code": "no_handler",
        "message": f"no handler registered for {name!r}",
        "retryable": False,
        "details": {},
    }


def _unserializable_envelope(exc: BaseException) -> dict[str, Any]:
    return {
        "type": "SerializationError",
        "code": "unserializable_result",
        "message": f"handler result is not JSON-serializable: {exc}",
        "retryable": False,
        "details": {},
    }


#: ``ride(task_ids, freeing)``: complete the tasks inside a claim session (the
#: settled ids), or None to decline; see ``Worker._claim_completing``.
Ride = Callable[[list[str], list["_Call"]], Awaitable[set[str] | None]]


class _Completions:
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
        self._pending: list[tuple[list[str], asyncio.Future[set[str]], _Call | None]] = []
        self._writer: asyncio.Task[None] | None = None

    async def complete(self, task_ids: list[str], freeing: _Call | None = None) -> set[str]:
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
        self, pending: list[tuple[list[str], asyncio.Future[set[str]], _Call | None]]
    ) -> None:
        task_ids = [task_id for ids, _, _ in pending for task_id in ids]
        try:
            settled = None
            if self._ride is not None:
                freeing = [call for _, _, call in pending if call is not None]
                settled = await self._ride(task_ids, freeing)
            if settled is None:
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

    async def _write_apart(
        self, pending: list[tuple[list[str], asyncio.Future[set[str]], _Call | None]]
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


def _leftovers(call: _Call) -> list[TaskContext]:
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


def _report_of(exc: BaseException, phase: str, task_id: str | None) -> ErrorReport:
    return ErrorReport(
        at_ms=now_ms(),
        phase=phase,
        task_id=task_id,
        exception_type=type(exc).__name__,
        message=str(exc),
        traceback="".join(traceback.format_exception(exc)),
    )


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
        self._owns_store = False
        # On a store that can complete inside a claim session (Postgres), the
        # writes that free slots carry the claim that refills them.
        ride = self._claim_completing if hasattr(store, "claim_session_completing") else None
        self._completions = _Completions(store, self._worker_id, ride)

        self._registrations: dict[str, Registration] = {}
        self._sources: tuple[Source, ...] = ()
        self._batches: dict[str, int | None] = {}
        self._rotation = 0
        self._stats: dict[str, _NameStats] = {}
        self._calls: dict[int, _Call] = {}
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
        **kwargs: Any,
    ) -> Worker:
        """A worker on its own ``SQLiteStore`` (closed by ``serve``/``background``/``close``)."""
        from engine.store.sqlite import SQLiteStore

        worker = cls(
            SQLiteStore(path, busy_timeout_ms=busy_timeout_ms),
            queues,
            concurrency=concurrency,
            lease_ms=lease_ms,
            **kwargs,
        )
        worker._owns_store = True
        return worker

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
        """A worker on its own ``PostgresStore`` (closed by ``serve``/``background``/``close``)."""
        from engine.store.postgres import PostgresStore

        worker = cls(
            PostgresStore(dsn, min_size=min_size, max_size=max_size, schema=schema),
            queues,
            concurrency=concurrency,
            lease_ms=lease_ms,
            **kwargs,
        )
        worker._owns_store = True
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
        if not callable(fn):
            raise ValueError(f"handler must be callable, got {fn!r}")
        if isinstance(name, TaskDef):
            name = name.name
        if name is None:
            name = getattr(fn, "__name__", "")
            if not isinstance(name, str) or not name.isidentifier():
                raise ValueError(
                    f"cannot derive a task name from {fn!r}; pass one, e.g. @w.task('x.y')"
                )
        if not isinstance(name, str) or not name:
            raise ValueError(f"task name must be a non-empty string, got {name!r}")
        _optional_int(batch, "batch", 1)
        _optional_int(concurrency, "concurrency", 1)
        if resource is not None and resource not in self._capacities:
            declared = sorted(self._capacities) or "none"
            raise ValueError(
                f"resource {resource!r} is not declared on this worker (declared: {declared}); "
                "pass resources={...} to Worker"
            )
        self._registrations[name] = Registration(
            name=name,
            fn=fn,
            batch=batch,
            concurrency=concurrency,
            resource=resource,
            is_async=_is_async(fn),
            wants_payload=_wants_payload(fn),
        )
        self._stats.setdefault(name, _NameStats())
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
        self._errors.append(_report_of(exc, phase, task_id))
        if self._on_error is None:
            return
        info: dict[str, Any] = {"phase": phase}
        if phase == "execute":
            info["task_id"] = task_id
        # A reporting hook must never take the worker down with it.
        with contextlib.suppress(Exception):
            outcome = self._on_error(exc, info)
            if inspect.isawaitable(outcome):
                fut = asyncio.ensure_future(outcome)
                fut.add_done_callback(lambda f: f.cancelled() or f.exception())

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

    def _plan(self, free: int, freeing: Sequence[_Call]) -> Callable[[Draw], Awaitable[PollResult]]:
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

    async def _claim_completing(self, task_ids: list[str], freeing: list[_Call]) -> set[str] | None:
        """Complete ``task_ids`` in the claim session that refills the slots they free.

        The ``_Completions`` ride hook (Postgres). ``freeing`` are the calls
        whose only settlement write this is: their slots count as free for the
        claim, since the completions and the claims commit together, and they
        are released before the new calls start. Declines (None: the caller
        writes the completions alone) when the loop could not claim now
        anyway: not running, stopping, paused, no handlers, a claim already on
        its way, or no slot free even after these calls.

        Returns:
            The ids settled, or None if declined.
        """
        store = self._store
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
            outcome = await store.claim_session_completing(  # type: ignore[attr-defined]
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
                self._spawn(self._fail_no_handler(task))
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
        call = _Call(next(self._call_ids), registration, contexts)
        if self._max_bytes is not None:
            call.bytes = sum(payload_bytes(t.payload) for t in tasks)
        self._hold(call)
        self._spawn(self._run_call(call))

    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._call_tasks.add(task)
        task.add_done_callback(self._call_tasks.discard)

    def _hold(self, call: _Call) -> None:
        self._calls[call.call_id] = call
        stats = self._stats[call.name]
        stats.calls += 1
        stats.tasks += len(call.contexts)
        resource = call.registration.resource
        if resource is not None:
            self._by_resource[resource] = self._by_resource.get(resource, 0) + 1
        self._bytes += call.bytes

    def _release(self, call: _Call) -> None:
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

    async def _fail_no_handler(self, task: Task) -> None:
        try:
            await self._store.fail(
                task_id=task.id,
                worker_id=self._worker_id,
                error=_no_handler_envelope(task.name),
                retryable=False,
            )
        except Exception as exc:
            self._report(exc, "execute", task.id)

    # -- one call ----------------------------------------------------------------------

    async def _invoke(self, call: _Call) -> Any:
        reg = call.registration
        if reg.batch is not None:
            args: tuple[Any, ...] = (call.contexts,)
        else:
            ctx = call.contexts[0]
            args = (ctx, ctx.payload) if reg.wants_payload else (ctx,)
        if reg.is_async:
            return await reg.fn(*args)
        # Plain functions run in a thread so the loop keeps heartbeating.
        outcome = await asyncio.to_thread(reg.fn, *args)
        if inspect.isawaitable(outcome):
            outcome = await outcome
        return outcome

    async def _run_call(self, call: _Call) -> None:
        self._arm_heartbeat(call)
        settle: Awaitable[None] | None = None
        try:
            if self._max_run_ms is None:
                outcome: Any = await self._invoke(call)
            else:
                handler = asyncio.ensure_future(self._invoke(call))
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
            settle = self._settle_failed(call, exc.envelope(), exc.retryable)
        except Exception as exc:
            self._record_failure(call, exc)
            envelope = {
                "type": type(exc).__name__,
                "code": "handler_error",
                "message": str(exc),
                "retryable": True,
                "details": {},
            }
            settle = self._settle_failed(call, envelope, True)
        else:
            settle = self._settle_returned(call, outcome)
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

    def _record_failure(self, call: _Call, exc: BaseException) -> None:
        self._failures.append(_report_of(exc, f"handler {call.name}", call.contexts[0].task_id))

    async def _abandon(self, call: _Call, handler: asyncio.Future[Any], max_run_ms: int) -> None:
        """``max_run_ms`` passed: flag every context, drop the handler, fail the leftovers."""
        call.abandoned = True
        leftovers = _leftovers(call)
        for ctx in call.contexts:
            ctx.mark_lost()
        handler.cancel()
        # Retrieve the abandoned handler's outcome so asyncio never logs it.
        handler.add_done_callback(lambda f: f.cancelled() or f.exception())
        self._release(call)
        envelope = _timeout_envelope(call.name, max_run_ms)
        self._failures.append(
            _report_of(
                TimeoutError(envelope["message"]), f"handler {call.name}", call.contexts[0].task_id
            )
        )
        await asyncio.gather(*(self._write_fail(c, envelope, True) for c in leftovers))

    async def _settle_returned(self, call: _Call, outcome: Any) -> None:
        leftovers = _leftovers(call)
        if not leftovers:
            return
        if call.registration.batch is None:
            if outcome is None:
                await self._complete_quietly(leftovers, call)
            else:
                await self._write_complete(leftovers[0], outcome)
            return
        results = outcome if isinstance(outcome, Mapping) else {}
        quiet = [c for c in leftovers if results.get(c.task_id) is None]
        valued = [c for c in leftovers if results.get(c.task_id) is not None]
        if not valued:
            await self._complete_quietly(quiet, call)
            return
        writes = [self._write_complete(c, results[c.task_id]) for c in valued]
        if quiet:
            writes.append(self._complete_quietly(quiet))
        await asyncio.gather(*writes)

    async def _settle_failed(self, call: _Call, envelope: dict[str, Any], retryable: bool) -> None:
        leftovers = _leftovers(call)
        if len(leftovers) == 1:
            await self._write_fail(leftovers[0], envelope, retryable)
        elif leftovers:
            await asyncio.gather(*(self._write_fail(c, envelope, retryable) for c in leftovers))

    async def _complete_quietly(
        self, contexts: list[TaskContext], freeing: _Call | None = None
    ) -> None:
        """``complete`` with no result for each context, in one shared statement.

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

    async def _write_complete(self, ctx: TaskContext, result: Any) -> None:
        if result is None:
            await self._complete_quietly([ctx])
            return
        try:
            await self._store.complete(
                task_id=ctx.task_id, worker_id=self._worker_id, result=result
            )
        except LostLease:
            ctx.mark_lost()
        except SerializationError as exc:
            await self._write_fail(ctx, _unserializable_envelope(exc), False)
        except Exception as exc:
            self._report(exc, "execute", ctx.task_id)

    async def _write_fail(
        self, ctx: TaskContext, envelope: dict[str, Any], retryable: bool
    ) -> None:
        delay = retry_delay_ms(
            ctx.attempt, base_ms=self._backoff_ms, cap_ms=self._backoff_max_ms, retryable=retryable
        )
        try:
            await self._store.fail(
                task_id=ctx.task_id,
                worker_id=self._worker_id,
                error=envelope,
                retryable=retryable,
                delay_ms=delay,
            )
        except LostLease:
            pass  # recovery owns the task now
        except Exception as exc:
            self._report(exc, "execute", ctx.task_id)

    # -- heartbeats ----------------------------------------------------------------------

    def _arm_heartbeat(self, call: _Call) -> None:
        # A timer rather than a task per call: most calls end before the first beat.
        loop = asyncio.get_running_loop()
        call.heartbeat = loop.call_later(self._heartbeat_ms / 1000, self._beat, call)

    def _beat(self, call: _Call) -> None:
        call.heartbeat = None
        if call.call_id in self._calls and not call.abandoned:
            self._spawn(self._heartbeat(call))

    async def _heartbeat(self, call: _Call) -> None:
        live = call.live()
        if not live:
            return
        failed: set[str] = set()
        try:
            sent = time.monotonic()
            reply = await self._beat_each(live, failed)
        except Exception as exc:
            self._report(exc, "execute", live[0].task_id)
            for ctx in live:
                if ctx.lease_expired:
                    ctx.mark_lost()
        else:
            now = now_ms()
            call.last_heartbeat_ms = now
            if reply:
                call.lease_until_ms = now + self._lease_ms
            for ctx in live:
                if ctx.task_id in reply:
                    ctx.extend_lease(sent + self._lease_ms / 1000)
                    ctx.observe_cancel(reply[ctx.task_id])
                elif ctx.task_id in failed:
                    if ctx.lease_expired:  # as when the whole batch fails
                        ctx.mark_lost()
                elif not ctx.settled:
                    # Absent and still unsettled after the reply: the lease is gone.
                    ctx.mark_lost()
        if call.call_id in self._calls and not call.abandoned and call.live():
            self._arm_heartbeat(call)

    async def _beat_each(self, live: list[TaskContext], failed: set[str]) -> dict[str, bool]:
        """One ``heartbeat_batch`` for the call's leases; if its statement fails (the
        connection aside), each lease alone, so one task's refused row costs only
        its own renewal. The ids whose renewal raised are added to ``failed``."""
        ids = [ctx.task_id for ctx in live]
        try:
            return await self._store.heartbeat_batch(
                task_ids=ids, worker_id=self._worker_id, lease_ms=self._lease_ms
            )
        except Exception as exc:
            if len(ids) == 1 or isinstance(exc, StoreUnavailable):
                raise
        reply: dict[str, bool] = {}
        for task_id in ids:
            try:
                reply.update(
                    await self._store.heartbeat_batch(
                        task_ids=[task_id], worker_id=self._worker_id, lease_ms=self._lease_ms
                    )
                )
            except Exception as exc:
                self._report(exc, "execute", task_id)
                failed.add(task_id)
        return reply

    # -- entry points ---------------------------------------------------------------------

    async def close(self) -> None:
        """Stop, wait for a run on this loop to drain, and close an owned store."""
        self.stop()
        finished = self._finished
        if self._running and finished is not None and self._loop is asyncio.get_running_loop():
            await finished.wait()
        if self._owns_store:
            await self._store.close()

    def serve(self, *, concurrency: int | None = None) -> None:
        """Run until SIGINT or SIGTERM (blocking), then close an owned store.

        Signal handlers are installed only here, never by ``run``/``background``,
        which embed the worker in someone else's process (or thread).
        """

        async def main() -> None:
            loop = asyncio.get_running_loop()
            installed = []
            if threading.current_thread() is threading.main_thread():
                for signum in (signal.SIGINT, signal.SIGTERM):
                    with contextlib.suppress(NotImplementedError, RuntimeError):
                        loop.add_signal_handler(signum, self.stop)
                        installed.append(signum)
            try:
                await self.run(concurrency=concurrency)
            finally:
                for signum in installed:
                    loop.remove_signal_handler(signum)
                if self._owns_store:
                    await self._store.close()

        asyncio.run(main())

    @contextlib.asynccontextmanager
    async def background(self, *, concurrency: int | None = None) -> AsyncIterator[Worker]:
        """Run the worker as a task for the duration of an ``async with`` block.

        On exit it stops, drains in-flight calls and closes an owned store. A
        failed ``run()`` is re-raised (if the body raised too, the body's error
        wins and the run's failure becomes its ``__cause__``).
        """
        runner = asyncio.ensure_future(self.run(concurrency=concurrency))

        async def shutdown() -> BaseException | None:
            self.stop()
            failure: BaseException | None = None
            try:
                await runner
            except asyncio.CancelledError:
                pass
            except BaseException as exc:
                failure = exc
            if self._owns_store:
                with contextlib.suppress(Exception):
                    await self._store.close()
            return failure

        try:
            yield self
        except BaseException as exc:
            failure = await shutdown()
            if failure is not None and exc.__cause__ is None:
                exc.__cause__ = failure
            raise
        failure = await shutdown()
        if failure is not None:
            raise failure
