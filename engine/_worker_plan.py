"""Quota planning for a claim session (docs/protocol-notes.md, Worker): pure, no I/O.

A worker's registrations become *sources* (a name drawing alone, or the names
sharing one draw); each poll gives every source a quota of calls, the tightest
of the worker's free slots, the source's own cap, its resource's free units and
the claim batch, and records what bound it. ``plan_poll`` runs the draws a
store hands it, so a store can re-run the plan when it retries a transaction.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from engine._models import Task, TaskDef
from engine._rules import at_least
from engine._worker_snapshot import Shortfall

if TYPE_CHECKING:
    from engine.store._base import Draw

Handler = Callable[..., Any]


def takes_payload(fn: Handler) -> bool:
    """Whether ``fn`` can take the payload as a second positional argument.

    Decided by binding two positional placeholders to the signature. A callable
    whose signature cannot be read is offered the payload.
    """
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return True
    try:
        signature.bind_partial(None, None)
    except TypeError:
        return False
    return True


def runs_on_loop(fn: Handler) -> bool:
    """Whether calling ``fn`` gives a coroutine (a plain function runs in a thread)."""
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


def registration_for(
    name: str | TaskDef[Any, Any] | None,
    fn: Handler,
    *,
    batch: int | None,
    concurrency: int | None,
    resource: str | None,
    declared: Collection[str],
) -> Registration:
    """Check a registration and decide its handler's calling convention once.

    ``name`` None takes the function's own name; ``declared`` are the worker's
    resources.

    Raises:
        ValueError: no usable name, ``batch``/``concurrency`` not an integer
            >= 1, or a resource the worker did not declare.
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
    for value, what in ((batch, "batch"), (concurrency, "concurrency")):
        if value is not None:
            at_least(value, what, 1)
    if resource is not None and resource not in declared:
        known = sorted(declared) or "none"
        raise ValueError(
            f"resource {resource!r} is not declared on this worker (declared: {known}); "
            "pass resources={...} to Worker"
        )
    return Registration(
        name=name,
        fn=fn,
        batch=batch,
        concurrency=concurrency,
        resource=resource,
        is_async=runs_on_loop(fn),
        wants_payload=takes_payload(fn),
    )


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
    """One poll's draws, beginning at ``sources[start]`` and wrapping around (§5.3).

    Pure apart from ``draw``: it reads a snapshot of in-flight state and returns
    what to run, so a store may re-run it when it retries its transaction.
    """
    turn = [*sources[start:], *sources[:start]]
    budget = _Budget(free)
    result = PollResult([], [])
    for source in turn:
        quota = source_quota(source, budget.slots, in_flight, budget.units, capacities, claim_batch)
        if quota.calls < 1:
            result.outcomes.append(SourceOutcome(source, 0, 0, quota.bound))
            continue
        asked = quota.calls * source.batch
        rows = await draw(list(source.names), asked)
        calls = split_calls(rows, batches)
        budget.spend(len(calls), source.resource)
        got_all = len(rows) >= asked
        result.outcomes.append(
            SourceOutcome(source, asked, len(rows), quota.bound if got_all else "nothing due")
        )
        result.calls += calls
    return result


class _Budget:
    """What one poll has left to give: worker slots, and resource units taken so far."""

    __slots__ = ("slots", "units")

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self.units: dict[str, int] = {}

    def spend(self, calls: int, resource: str | None) -> None:
        self.slots -= calls
        if resource is not None:
            self.units[resource] = self.units.get(resource, 0) + calls


def payload_bytes(payload: Any) -> int:
    """UTF-8 length of the payload's compact JSON (non-ASCII unescaped); 0 if unmeasurable."""
    try:
        return len(orjson.dumps(payload))
    except (TypeError, orjson.JSONEncodeError):
        return 0
