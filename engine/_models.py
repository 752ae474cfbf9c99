"""The task model and the small value types shared by every layer."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar, get_args

TaskStatus = Literal["queued", "running", "succeeded", "failed", "canceled"]
Conflict = Literal["reuse", "reuse-succeeded", "reject", "replace"]

STATUSES: tuple[TaskStatus, ...] = get_args(TaskStatus)
TERMINAL_STATUSES: frozenset[str] = frozenset({"succeeded", "failed", "canceled"})
LIVE_STATUSES: frozenset[str] = frozenset({"queued", "running"})
CONFLICTS: tuple[Conflict, ...] = get_args(Conflict)

P = TypeVar("P")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class UndecodableJSON:
    """A stored JSON column the engine cannot decode, as inspection reads show it.

    Inspection reads (``engine.inspection.Inspector``, ``get`` and the other row
    reads a console makes) put this in place of the decoded value, so one bad row
    never stops a page of good ones from being shown.
    """

    #: The column's raw text, exactly as stored.
    text: str
    #: Why it cannot be decoded, in words (e.g. "nested deeper than 1024 levels").
    reason: str


def is_terminal_status(status: str) -> bool:
    """True for succeeded, failed and canceled."""
    return status in TERMINAL_STATUSES


@dataclass(frozen=True, slots=True)
class Task:
    """One row of ``cairnq_tasks`` with its JSON columns decoded.

    A JSON column the engine cannot decode (stored by another writer: nested
    deeper than ``engine._json.MAX_DEPTH``, or not JSON at all) holds an
    ``engine.inspection.UndecodableJSON`` with its raw text instead. Workers never
    receive such a task: a claim fails it (``code="undecodable_json"``).
    """

    id: str
    name: str
    queue: str
    status: TaskStatus
    payload: Any
    metadata: dict[str, Any] | UndecodableJSON
    result: Any
    error: dict[str, Any] | UndecodableJSON | None
    progress: float | None
    message: str | None
    attempt: int
    max_attempts: int
    priority: int
    worker_id: str | None
    lease_until_ms: int | None
    run_at_ms: int
    cancel_requested_at_ms: int | None
    parent_id: str | None
    root_id: str | None
    correlation_id: str | None
    created_at_ms: int
    updated_at_ms: int
    completed_at_ms: int | None

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES

    @property
    def cancel_requested(self) -> bool:
        return self.cancel_requested_at_ms is not None

    @property
    def queued(self) -> bool:
        return self.status == "queued"

    @property
    def running(self) -> bool:
        return self.status == "running"

    @property
    def succeeded(self) -> bool:
        return self.status == "succeeded"

    @property
    def failed(self) -> bool:
        return self.status == "failed"

    @property
    def canceled(self) -> bool:
        return self.status == "canceled"


@dataclass(frozen=True, slots=True)
class TaskRef:
    """Just a task's id and status: what the cheap status probes return."""

    id: str
    status: TaskStatus

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES


# Not slotted: on Python 3.11 and 3.12, calling a subscripted alias
# (``TaskDef[dict, dict]("greet")``) makes typing set ``__orig_class__`` on the new
# instance, and a frozen *slotted* dataclass's ``__setattr__`` then fails with a
# TypeError (its ``super()`` cell names the class replaced by the slotted copy)
# instead of the FrozenInstanceError typing expects and ignores.
@dataclass(frozen=True)
class TaskDef(Generic[P, R]):
    """A typed task name shared by the submitting and the handling side."""

    name: str


SubmitAction = Literal["created", "reused", "replaced"]


@dataclass(frozen=True, slots=True)
class SubmitOutcome:
    """What a submit did, as ``CairnQ.submit_outcome`` / ``TaskStore.submit_outcome`` say.

    ``action``: ``"created"`` (a new task; no key, or the key was free),
    ``"reused"`` (the key's task was handed back; nothing written) or
    ``"replaced"`` (a new task, and the key moved to it from ``previous``).
    ``task`` is the task the submit resolved to. ``previous`` is the task the
    key held before a ``"replaced"``, as it stands after the submit;
    ``canceled`` says whether this submit canceled it (``conflict="replace"``
    of a live task).
    """

    task: Task
    action: SubmitAction
    previous: Task | None = None
    canceled: bool = False


TASK_COLUMNS: tuple[str, ...] = tuple(Task.__dataclass_fields__)


def in_claim_order(tasks: Iterable[Task]) -> list[Task]:
    """``tasks`` sorted as a claim picks them: priority desc, then due time, then id.

    A claim's ``update ... returning`` hands rows back in whatever order the
    database updated them (§4.13 allows it); callers and the worker's batch calls
    get them in the order they were chosen, as cairnq returns them.
    """
    return sorted(tasks, key=lambda t: (-t.priority, t.run_at_ms, t.id))
