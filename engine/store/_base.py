"""The store contract shared by both dialects.

``TaskStore`` holds everything that does not depend on the driver: argument
validation (``engine._rules``, before any I/O), id generation and JSON encoding
for submits, the claim variant for a draw, the backpressure gate, in-process
wakeups and row decoding. A dialect implements the ``_``-prefixed primitives,
each of which is one statement or one transaction of the protocol
(docs/protocol-notes.md, "Statements").
"""

from __future__ import annotations

import abc
import asyncio
import builtins
import contextlib
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

from engine import _json, _rules
from engine._errors import NotQueued, SerializationError, UnsupportedBackend
from engine._ids import new_task_id
from engine._json import UndecodableJSON
from engine._models import CONFLICTS, STATUSES, TERMINAL_STATUSES, Task, TaskRef
from engine._sql import Dialect, statement
from engine.store._signals import Signals, Wake, WatchSignal

T = TypeVar("T")

#: ``draw(names, limit)`` inside a claim session: one claim statement in the
#: session's transaction. ``names=None`` draws any name.
Draw = Callable[[Sequence[str] | None, int], Awaitable[list[Task]]]
#: A claim plan: called once with ``draw``, inside the session's transaction.
Plan = Callable[[Draw], Awaitable[T]]

LEASE_EXPIRED_ERROR: dict[str, Any] = {
    "type": "LeaseExpired",
    "code": "lease_expired",
    "message": "task lease expired and max attempts reached",
    "retryable": False,
    "details": {},
}
LEASE_EXPIRED_JSON = _json.dumps(LEASE_EXPIRED_ERROR)


@dataclass(frozen=True, slots=True)
class NewTask:
    """A validated, encoded submit: everything ``insert_task`` binds but the clock."""

    id: str
    name: str
    queue: str
    payload_json: str
    metadata_json: str
    max_attempts: int
    priority: int
    parent_id: str | None
    root_id: str
    correlation_id: str | None
    delay_ms: int
    key: str | None
    conflict: str


#: What ``read_statement`` may run, on either dialect: these reads by name, and
#: the Inspector's ``inspect_*`` statements (all of them reads). A list, not a
#: look at the text: a Postgres claim starts with ``with`` and writes, and
#: ``lock_key`` is a ``select`` that takes a lock.
READ_STATEMENTS = frozenset(
    {
        "get",
        "get_by_key",
        "get_key",
        "get_status",
        "get_status_by_key",
        "list",
        "stats",
        "queue_depth",
        "claimable_probe",
        "protocol_version",
        "installations",
    }
)
_INSPECT_STATEMENT = re.compile(r"^inspect_[a-z0-9_]+$")


@dataclass(frozen=True, slots=True)
class ClaimArgs:
    """A claim's validated arguments."""

    queues: list[str]
    worker_id: str
    lease_ms: int
    names: list[str] | None


def claim_variant(queues: Sequence[str], names: Sequence[str] | None) -> tuple[str, dict[str, Any]]:
    """The claim statement for these filters and its list/equality parameters (§4.13).

    One queue or one name binds an equality (``queue``/``name``) so the indexes
    stay usable; otherwise the list (``queues``/``names``, None = any name).
    The dialect encodes the lists as it binds them.
    """
    params: dict[str, Any] = {}
    one_queue = len(queues) == 1
    one_name = names is not None and len(names) == 1
    if one_queue:
        params["queue"] = queues[0]
    else:
        params["queues"] = list(queues)
    if one_name:
        assert names is not None
        params["name"] = names[0]
    else:
        params["names"] = None if names is None else list(names)
    variant = "claim" + ("_one_queue" if one_queue else "") + ("_one_name" if one_name else "")
    return variant, params


@dataclass(slots=True)
class CompletingClaim(Generic[T]):
    """What a store's ``claim_session_completing`` did (stores declaring ``completing_claim``)."""

    #: The ids completed; an id asked for but missing had lost its lease.
    settled: set[str]
    #: The plan's value; None if the probe found nothing or the claim failed.
    value: T | None
    #: Why the claim part failed (the completions were then written alone).
    claim_error: Exception | None
    recovered: list[Task] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class StoreCapabilities:
    """What a store offers beyond the protocol's operations, declared by its class.

    The worker reads these flags rather than probing the store for methods.
    """

    #: ``claim_session_completing``: settle finished tasks and claim their
    #: replacements in one transaction (one commit instead of two).
    completing_claim: bool = False


class TaskStore(abc.ABC):
    """One cairnq database (SQLite file or Postgres schema) and every protocol operation.

    Public methods validate their arguments before any I/O and raise ``ValueError``
    (or ``SerializationError``) with nothing written. Subclasses implement the
    ``_``-prefixed primitives.
    """

    dialect: Dialect
    capabilities: ClassVar[StoreCapabilities] = StoreCapabilities()
    #: Postgres text and jsonb cannot hold U+0000; SQLite keeps it. The one
    #: difference in what a value may be that a dialect declares (engine._rules).
    text_refuses_nul = False

    def __init__(self, identity: str) -> None:
        # Shared by every handle on this database in the process (see Signals).
        self.signals = Signals.shared(identity)
        self._gate: Any = None  # engine._gate.QueueGate, attached by CairnQ/Worker

    # -- lifecycle -----------------------------------------------------------

    @abc.abstractmethod
    async def connect(self) -> None:
        """Open, migrate, check ``protocol_version``; idempotent."""

    @abc.abstractmethod
    async def close(self) -> None:
        """A barrier: writes already accepted land; later calls raise ``StoreClosed``."""

    @property
    @abc.abstractmethod
    def target(self) -> str:
        """Where the store points, safe to display (a DSN's password is redacted)."""

    async def __aenter__(self) -> TaskStore:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- gate ------------------------------------------------------------------

    def set_queue_gate(self, gate: Any) -> None:
        """Attach a backpressure gate (``engine._gate.QueueGate``) to every submit."""
        self._gate = gate

    # -- submit ----------------------------------------------------------------

    def prepare_submit(
        self,
        *,
        name: str,
        payload: Any = None,
        queue: str = "default",
        key: str | None = None,
        conflict: str = "reuse",
        max_attempts: int = 3,
        priority: int = 0,
        metadata: Mapping[str, Any] | None = None,
        parent_id: str | None = None,
        root_id: str | None = None,
        correlation_id: str | None = None,
        delay_ms: int = 0,
    ) -> NewTask:
        """Validate and encode a submit without I/O (ValueError/SerializationError)."""
        nul = self.text_refuses_nul
        _rules.indexed_text(name, "name", refuses_nul=nul)
        _rules.indexed_text(queue, "queue", refuses_nul=nul)
        if not isinstance(conflict, str) or conflict not in CONFLICTS:
            raise ValueError(f"unknown conflict strategy {conflict!r}; expected one of {CONFLICTS}")
        _rules.int32(max_attempts, "max_attempts", minimum=1)
        _rules.int32(priority, "priority")
        _rules.duration_ms(delay_ms, "delay_ms")
        _rules.optional_key(key, refuses_nul=nul)
        _rules.optional_indexed_text(parent_id, "parent_id", refuses_nul=nul)
        _rules.optional_indexed_text(root_id, "root_id", refuses_nul=nul)
        _rules.optional_indexed_text(correlation_id, "correlation_id", refuses_nul=nul)
        if metadata is not None and not isinstance(metadata, Mapping):
            raise SerializationError("metadata must be a mapping or None")
        task_id = new_task_id()
        return NewTask(
            id=task_id,
            name=name,
            queue=queue,
            payload_json=self._json(_json.dumps({} if payload is None else payload), "payload"),
            metadata_json=self._json(_json.dumps(dict(metadata) if metadata else {}), "metadata"),
            max_attempts=max_attempts,
            priority=priority,
            parent_id=parent_id,
            root_id=root_id or task_id,
            correlation_id=correlation_id,
            delay_ms=delay_ms,
            key=key,
            conflict=conflict,
        )

    async def submit(
        self,
        *,
        name: str,
        payload: Any = None,
        queue: str = "default",
        key: str | None = None,
        conflict: str = "reuse",
        max_attempts: int = 3,
        priority: int = 0,
        metadata: Mapping[str, Any] | None = None,
        parent_id: str | None = None,
        root_id: str | None = None,
        correlation_id: str | None = None,
        delay_ms: int = 0,
    ) -> Task:
        """Insert a task, or resolve a keyed submit by its conflict strategy (§4.3).

        Raises:
            ValueError: bad arguments (nothing written).
            SerializationError: payload or metadata has no faithful JSON form.
            AlreadyExists: ``conflict="reject"`` and the key holds a task.
            QueueFull: the backpressure gate gave up.
        """
        new = self.prepare_submit(
            name=name,
            payload=payload,
            queue=queue,
            key=key,
            conflict=conflict,
            max_attempts=max_attempts,
            priority=priority,
            metadata=metadata,
            parent_id=parent_id,
            root_id=root_id,
            correlation_id=correlation_id,
            delay_ms=delay_ms,
        )
        if self._gate is not None:
            await self._gate.admit(self, new.queue)
        task = await self._submit(new)
        if task.id == new.id:
            self.signals.queued(task.queue)
        return task

    @abc.abstractmethod
    async def _submit(self, new: NewTask) -> Task:
        """insert_task, or the keyed transaction; returns the new or reused row."""

    # -- reads -----------------------------------------------------------------

    async def get(self, task_id: str) -> Task | None:
        """The task, or None."""
        return await self._get(self._text(task_id, "task_id"))

    async def get_by_key(self, key: str) -> Task | None:
        """The task the key points at, or None."""
        return await self._get_by_key(self._text(key, "key"))

    async def get_status(self, task_id: str) -> TaskRef | None:
        """Just ``(id, status)``, or None."""
        return await self._get_status(self._text(task_id, "task_id"))

    async def get_status_by_key(self, key: str) -> TaskRef | None:
        """``(id, status)`` of the task the key points at now, or None."""
        return await self._get_status_by_key(self._text(key, "key"))

    @abc.abstractmethod
    async def _get(self, task_id: str) -> Task | None: ...

    @abc.abstractmethod
    async def _get_by_key(self, key: str) -> Task | None: ...

    @abc.abstractmethod
    async def _get_status(self, task_id: str) -> TaskRef | None: ...

    @abc.abstractmethod
    async def _get_status_by_key(self, key: str) -> TaskRef | None: ...

    async def list(
        self,
        *,
        status: str | None = None,
        queue: str | None = None,
        name: str | None = None,
        root_id: str | None = None,
        correlation_id: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> builtins.list[Task]:
        """Tasks matching every given filter, newest first (§4.5)."""
        _rules.status(status)
        _rules.integer(limit, "limit", minimum=0)
        _rules.integer(offset, "offset", minimum=0)
        filters = {
            "status": status,
            "queue": self._optional_text(queue, "queue"),
            "name": self._optional_text(name, "name"),
            "root_id": self._optional_text(root_id, "root_id"),
            "correlation_id": self._optional_text(correlation_id, "correlation_id"),
        }
        return await self._list(filters, limit, offset)

    @abc.abstractmethod
    async def _list(
        self, filters: dict[str, str | None], limit: int, offset: int
    ) -> builtins.list[Task]: ...

    async def stats(self, queue: str | None = None) -> dict[str, dict[str, int]]:
        """Counts per queue and status, zero-filled (§4.6)."""
        self._optional_text(queue, "queue")
        counted = await self._stats(queue)
        # A named queue is reported even when empty; otherwise only queues with rows.
        names = [queue] if queue is not None else list(dict.fromkeys(row[0] for row in counted))
        table: dict[str, dict[str, int]] = {name: dict.fromkeys(STATUSES, 0) for name in names}
        for name, status, count in counted:
            table[name][status] = int(count)
        return table

    @abc.abstractmethod
    async def _stats(self, queue: str | None) -> builtins.list[tuple[str, str, int]]:
        """``(queue, status, count)`` rows."""

    async def queue_depth(self, queue: str, max_depth: int) -> int:
        """Headroom ``max_depth - min(queued rows, max_depth)`` (§4.7)."""
        self._text(queue, "queue")
        _rules.integer(max_depth, "max_depth", minimum=0)
        return await self._queue_depth(queue, max_depth)

    @abc.abstractmethod
    async def _queue_depth(self, queue: str, max_depth: int) -> int: ...

    # -- cancel / retry / purge -------------------------------------------------

    async def cancel(self, task_id: str) -> Task | None:
        """Cancel a live task (queued: at once; running: cooperative) (§4.8)."""
        task = await self._cancel(self._text(task_id, "task_id"))
        self._after_write(task)
        return task

    async def cancel_by_key(self, key: str) -> Task | None:
        task = await self._cancel_by_key(self._text(key, "key"))
        self._after_write(task)
        return task

    async def retry(self, task_id: str, *, reset_attempt: bool = False) -> Task | None:
        """Requeue a failed or canceled task (§4.9)."""
        task = await self._retry(
            self._text(task_id, "task_id"), _rules.boolean(reset_attempt, "reset_attempt")
        )
        self._after_write(task)
        return task

    async def retry_by_key(self, key: str, *, reset_attempt: bool = False) -> Task | None:
        task = await self._retry_by_key(
            self._text(key, "key"), _rules.boolean(reset_attempt, "reset_attempt")
        )
        self._after_write(task)
        return task

    @abc.abstractmethod
    async def _cancel(self, task_id: str) -> Task | None: ...

    @abc.abstractmethod
    async def _cancel_by_key(self, key: str) -> Task | None: ...

    @abc.abstractmethod
    async def _retry(self, task_id: str, reset_attempt: bool) -> Task | None: ...

    @abc.abstractmethod
    async def _retry_by_key(self, key: str, reset_attempt: bool) -> Task | None: ...

    async def run_now(self, task_id: str) -> Task:
        """Make a queued task due now (an earlier due time is kept); ours, beyond the SDK.

        Raises:
            NotQueued: the task is running or finished, or there is no such task.
        """
        task_id = self._text(task_id, "task_id")
        return await self._rescheduled(task_id, await self._reschedule("run_now", task_id, {}))

    async def delay(self, task_id: str, delay_ms: int) -> Task:
        """Push a queued task back by ``delay_ms`` from its due time (or from now if due).

        Raises:
            ValueError: ``delay_ms`` not a positive integer.
            NotQueued: the task is running or finished, or there is no such task.
        """
        task_id = self._text(task_id, "task_id")
        _rules.integer(delay_ms, "delay_ms", minimum=1)
        task = await self._reschedule("delay", task_id, {"delay_ms": delay_ms})
        return await self._rescheduled(task_id, task)

    async def _rescheduled(self, task_id: str, task: Task | None) -> Task:
        if task is None:
            ref = await self.get_status(task_id)
            raise NotQueued(task_id, None if ref is None else ref.status)
        self._after_write(task)
        return task

    @abc.abstractmethod
    async def _reschedule(
        self, statement: str, task_id: str, params: dict[str, Any]
    ) -> Task | None:
        """Run ``run_now`` or ``delay`` on a queued task; None if it is not queued."""

    async def purge(
        self,
        *,
        older_than_ms: int = 0,
        queue: str | None = None,
        status: str | None = None,
        name: str | None = None,
        limit: int = 1_000,
    ) -> builtins.list[str]:
        """Delete up to ``limit`` terminal tasks completed before the cutoff (§4.10)."""
        _rules.duration_ms(older_than_ms, "older_than_ms")
        _rules.integer(limit, "limit", minimum=1)
        _rules.status(status, terminal_only=True)
        filters = {
            "queue": self._optional_text(queue, "queue"),
            "status": status,
            "name": self._optional_text(name, "name"),
        }
        return await self._purge(older_than_ms, filters, limit)

    @abc.abstractmethod
    async def _purge(
        self, older_than_ms: int, filters: dict[str, str | None], limit: int
    ) -> builtins.list[str]: ...

    # -- claims ----------------------------------------------------------------

    async def claim(
        self,
        *,
        queues: Sequence[str],
        worker_id: str,
        lease_ms: int = 30_000,
        limit: int = 1,
        names: Sequence[str] | None = None,
    ) -> builtins.list[Task]:
        """A claim session with one draw (§4.14); empty if nothing is claimable.

        Raises:
            ValueError: bad queues, names, worker id, ``lease_ms`` or a negative
                ``limit`` (``limit=0`` claims nothing).
        """
        _rules.integer(limit, "limit", minimum=0)

        async def plan(draw: Draw) -> builtins.list[Task]:
            return await draw(names, limit)

        result = await self.claim_session(
            queues=queues, worker_id=worker_id, lease_ms=lease_ms, names=names, plan=plan
        )
        return result if result is not None else []

    async def claim_session(
        self,
        *,
        queues: Sequence[str],
        worker_id: str,
        lease_ms: int = 30_000,
        names: Sequence[str] | None,
        plan: Plan[T],
    ) -> T | None:
        """Probe, then one transaction: recover expired leases, run ``plan(draw)``.

        Returns the plan's value, or None when the probe found nothing to do (the
        plan is then not called and no transaction is opened).
        """
        args = self.check_claim(queues, worker_id, lease_ms, names)
        if args.names == []:
            return None
        screened, set_aside = screen_plan(plan, top_up=True)
        try:
            return await self._claim_session(
                args.queues, args.worker_id, args.lease_ms, args.names, screened
            )
        finally:
            await self._fail_undecodable(set_aside)

    def check_claim(self, queues: Any, worker_id: Any, lease_ms: Any, names: Any) -> ClaimArgs:
        """A claim's arguments checked by the shared rules (ValueError otherwise)."""
        nul = self.text_refuses_nul
        return ClaimArgs(
            queues=_rules.queues(queues, refuses_nul=nul),
            worker_id=self._text(worker_id, "worker_id"),
            lease_ms=_rules.duration_ms(lease_ms, "lease_ms", minimum=1),
            names=_rules.names(names, refuses_nul=nul),
        )

    def draw_variant(
        self, queues: builtins.list[str], names: Any, limit: Any
    ) -> tuple[str, dict[str, Any]] | None:
        """One draw's claim variant and parameters (§4.13); None = no statement to run.

        Raises:
            ValueError: bad names or a negative ``limit``.
        """
        wanted = _rules.names(names, refuses_nul=self.text_refuses_nul)
        _rules.integer(limit, "limit", minimum=0)
        if limit == 0 or wanted == []:
            return None
        variant, params = claim_variant(queues, wanted)
        params["limit"] = limit
        return variant, params

    @abc.abstractmethod
    async def _claim_session(
        self,
        queues: builtins.list[str],
        worker_id: str,
        lease_ms: int,
        names: builtins.list[str] | None,
        plan: Plan[T],
    ) -> T | None:
        """Dialect transaction; each draw validates ``limit`` (<= 0 or [] → no statement).

        Recovery's requeues and terminal entries must reach ``self.signals``.
        """

    async def _fail_undecodable(self, tasks: builtins.list[Task]) -> None:
        """Fail, once and for good, claimed tasks whose payload or metadata cannot be decoded.

        A claim never hands such a task to its caller: no handler could read
        it, and left queued it would be drawn again by every claim. Best
        effort: a row whose failure cannot be written now stays running under
        the claim's lease and comes back through lease recovery.
        """
        if not tasks:
            return
        await asyncio.gather(
            *(
                self.fail(
                    task_id=task.id,
                    worker_id=str(task.worker_id),
                    error=undecodable_error(task),
                    retryable=False,
                )
                for task in tasks
            ),
            return_exceptions=True,
        )

    # -- owned writes ------------------------------------------------------------

    async def heartbeat(self, *, task_id: str, worker_id: str, lease_ms: int = 30_000) -> Task:
        """Renew one lease (§4.15).

        Raises:
            LostLease: the task is no longer running under this worker's lease.
        """
        task_id, worker_id = self._owned_ids(task_id, worker_id)
        _rules.duration_ms(lease_ms, "lease_ms", minimum=1)
        return await self._heartbeat(task_id, worker_id, lease_ms)

    @abc.abstractmethod
    async def _heartbeat(self, task_id: str, worker_id: str, lease_ms: int) -> Task: ...

    async def heartbeat_batch(
        self, *, task_ids: Sequence[str], worker_id: str, lease_ms: int = 30_000
    ) -> dict[str, bool]:
        """Renew each owned lease; ``{id: cancel requested}`` for renewed rows only,
        in the order the ids were given."""
        ids = _rules.text_list(task_ids, "task_ids", refuses_nul=self.text_refuses_nul)
        self._text(worker_id, "worker_id")
        _rules.duration_ms(lease_ms, "lease_ms", minimum=1)
        if not ids:
            return {}
        renewed = await self._heartbeat_batch(ids, worker_id, lease_ms)
        return {task_id: renewed[task_id] for task_id in ids if task_id in renewed}

    @abc.abstractmethod
    async def _heartbeat_batch(
        self, task_ids: builtins.list[str], worker_id: str, lease_ms: int
    ) -> dict[str, bool]: ...

    async def progress(
        self,
        *,
        task_id: str,
        worker_id: str,
        progress: float | None = None,
        message: str | None = None,
    ) -> Task:
        """Coalescing progress/message update: None keeps each (§4.16).

        Raises:
            ValueError: progress is not a finite number, message not storable text.
            LostLease: the task is no longer running under this worker's lease.
        """
        task_id, worker_id = self._owned_ids(task_id, worker_id)
        value = _rules.progress(progress)
        message = self._optional_text(message, "message")
        return await self._progress(task_id, worker_id, value, message)

    @abc.abstractmethod
    async def _progress(
        self, task_id: str, worker_id: str, progress: float | None, message: str | None
    ) -> Task: ...

    async def succeed(self, *, task_id: str, worker_id: str, result: Any = None) -> Task:
        """Raw success, ignoring a cancel request (§4.17)."""
        task_id, worker_id = self._owned_ids(task_id, worker_id)
        task = await self._succeed(task_id, worker_id, self._result_json(result))
        self._after_write(task)
        return task

    async def complete(self, *, task_id: str, worker_id: str, result: Any = None) -> Task:
        """The worker's finaliser: succeeded, or canceled if cancel was requested."""
        task_id, worker_id = self._owned_ids(task_id, worker_id)
        task = await self._complete(task_id, worker_id, self._result_json(result))
        self._after_write(task)
        return task

    async def fail(
        self,
        *,
        task_id: str,
        worker_id: str,
        error: Mapping[str, Any],
        retryable: bool = True,
        delay_ms: int = 0,
    ) -> Task:
        """Record a failure: requeue, fail for good, or cancel (§4.18)."""
        task_id, worker_id = self._owned_ids(task_id, worker_id)
        _rules.boolean(retryable, "retryable")
        _rules.duration_ms(delay_ms, "delay_ms")
        task = await self._fail(
            task_id, worker_id, encode_error(error, retryable), retryable, delay_ms
        )
        self._after_write(task)
        return task

    async def complete_many(self, *, task_ids: Sequence[str], worker_id: str) -> set[str]:
        """``complete`` with no result for several owned tasks, in one statement.

        The worker's settle path for handlers that return nothing: each row
        follows the rule of ``complete`` (cancel wins) and is checked on its own.

        Args:
            task_ids: the tasks to settle.
            worker_id: the worker that should own them.

        Returns:
            The ids settled (succeeded, or canceled when a cancel was
            requested); an id missing lost its lease, as ``LostLease`` would say.

        Raises:
            ValueError: an id or the worker id is not a non-empty string.
        """
        ids = _rules.text_list(task_ids, "task_ids", refuses_nul=self.text_refuses_nul)
        self._text(worker_id, "worker_id")
        if not ids:
            return set()
        settled = await self._complete_many(ids, worker_id)
        for task_id in settled:
            self.signals.done(task_id)  # complete only ever ends a task
        return settled

    @abc.abstractmethod
    async def _complete_many(self, task_ids: builtins.list[str], worker_id: str) -> set[str]: ...

    @abc.abstractmethod
    async def _succeed(self, task_id: str, worker_id: str, result_json: str | None) -> Task: ...

    @abc.abstractmethod
    async def _complete(self, task_id: str, worker_id: str, result_json: str | None) -> Task: ...

    @abc.abstractmethod
    async def _fail(
        self, task_id: str, worker_id: str, error_json: str, retryable: bool, delay_ms: int
    ) -> Task: ...

    async def complete_in(
        self,
        *,
        task_id: str,
        worker_id: str,
        result: Any = None,
        write: Callable[[Any], Awaitable[Any]],
    ) -> Task:
        """``complete`` committed in one transaction with ``await write(session)``.

        On Postgres ``session`` is the psycopg ``AsyncConnection`` inside the open
        transaction. With ``result`` None, what ``write`` returns becomes the result
        (as cairnq's ``succeed_in``).

        Raises:
            UnsupportedBackend: this dialect has no caller-visible transaction
                (only Postgres offers it).
            LostLease: the task is not owned (the caller's write is rolled back).
            SerializationError: ``result`` has no faithful JSON form.
        """
        return await self._owned_in("complete", task_id, worker_id, result, write)

    async def succeed_in(
        self,
        *,
        task_id: str,
        worker_id: str,
        result: Any = None,
        write: Callable[[Any], Awaitable[Any]],
    ) -> Task:
        """Raw ``succeed`` committed in one transaction with ``await write(session)``.

        Raises:
            UnsupportedBackend, LostLease, SerializationError: as for ``complete_in``.
        """
        return await self._owned_in("succeed", task_id, worker_id, result, write)

    async def _owned_in(
        self,
        name: str,
        task_id: str,
        worker_id: str,
        result: Any,
        write: Callable[[Any], Awaitable[Any]],
    ) -> Task:
        """Settle by statement ``name`` in the caller's transaction (a dialect that has one)."""
        raise UnsupportedBackend(f"{name}_in needs Postgres; this store is {self.dialect}")

    @abc.abstractmethod
    async def protocol_version(self) -> int:
        """The database's ``protocol_version`` (0 when the row is missing)."""

    # -- wakeups -------------------------------------------------------------------

    def arm_claim_wake(self, queues: Sequence[str]) -> Wake:
        """Arm, synchronously, a wake for a task that may be claimable on ``queues``.

        Arm it before looking at the database: a write after the look then
        fires it. ``close()`` it when done. A dialect adds its own sources
        (another process's commits) to the same wake.
        """
        return self.signals.arm_claim(queues)

    def arm_task_done_wake(self, task_id: str) -> Wake:
        """Arm, synchronously, a wake for ``task_id`` going terminal (see ``arm_claim_wake``)."""
        return self.signals.arm_done(task_id)

    async def claim_wake(self, queues: Sequence[str], timeout_ms: float) -> bool:
        """Sleep until a task may be claimable on ``queues`` or the timeout passes."""
        wake = self.arm_claim_wake(queues)
        try:
            return await wake.woken(timeout_ms)
        finally:
            wake.close()

    async def task_done_wake(self, task_id: str, timeout_ms: float) -> bool:
        """Sleep until ``task_id`` may have gone terminal or the timeout passes."""
        wake = self.arm_task_done_wake(task_id)
        try:
            return await wake.woken(timeout_ms)
        finally:
            wake.close()

    def watch(self, consumer: Callable[[WatchSignal], None]) -> Callable[[], None]:
        """Subscribe to "queued"/"done" signals (in-process writes; NOTIFY on Postgres)."""
        return self.signals.subscribe(consumer)

    # -- named reads for introspection (engine.Inspector) ---------------------------

    @abc.abstractmethod
    async def read_statement(
        self, name: str, params: Mapping[str, Any]
    ) -> builtins.list[dict[str, Any]]:
        """Run the read-only statement ``sql/<dialect>/<name>.sql``; rows as dicts.

        Optional filters written ``(:p is null or col = :p)`` are specialised for
        the parameters that have a value (``engine._sql.specialise``). Used by
        ``engine.Inspector``; never by write paths.
        """

    def read_statement_text(self, name: Any) -> str:
        """The text of a statement ``read_statement`` may run on this dialect.

        Raises:
            ValueError: not a read-only statement, or none by that name here.
        """
        if not isinstance(name, str) or not (
            name in READ_STATEMENTS or _INSPECT_STATEMENT.match(name)
        ):
            raise ValueError(f"{name!r} is not a read-only statement")
        try:
            return statement(self.dialect, name)
        except FileNotFoundError:
            raise ValueError(f"no {self.dialect} statement named {name!r}") from None

    # -- helpers for subclasses ---------------------------------------------------

    def _text(self, value: Any, field: str) -> str:
        """A non-empty string this dialect can store (``engine._rules.text``)."""
        return _rules.text(value, field, refuses_nul=self.text_refuses_nul)

    def _optional_text(self, value: Any, field: str) -> str | None:
        return _rules.optional_text(value, field, refuses_nul=self.text_refuses_nul)

    def _owned_ids(self, task_id: Any, worker_id: Any) -> tuple[str, str]:
        """An owned write's ``(task_id, worker_id)``, checked."""
        return self._text(task_id, "task_id"), self._text(worker_id, "worker_id")

    def _json(self, encoded: str, field: str) -> str:
        """Encoded JSON this dialect's column can hold (jsonb refuses NUL)."""
        return _rules.json_text(encoded, field, refuses_nul=self.text_refuses_nul)

    def _result_json(self, result: Any) -> str | None:
        """A result as JSON text, or None for SQL NULL (SerializationError if it has no form)."""
        encoded = _json.dumps_or_none(result)
        return None if encoded is None else self._json(encoded, "result")

    def _after_write(self, task: Task | None) -> None:
        """Announce what a committed write did: queued again, or terminal."""
        if task is None:
            return
        if task.status == "queued":
            self.signals.queued(task.queue)
        elif task.status in TERMINAL_STATUSES:
            self.signals.done(task.id, task)  # waiters here take the row, no read

    @staticmethod
    def task_from_row(row: Mapping[str, Any], *, decoded_json: bool = False) -> Task:
        """Build a ``Task`` from a full row keyed by column (JSON as text unless
        ``decoded_json``)."""
        return task_from_values([row[column] for column in ROW_COLUMNS], decoded_json=decoded_json)


#: ``cairnq_tasks``' columns in the order ``select *`` returns them (§1.5).
ROW_COLUMNS = (
    "id",
    "name",
    "queue",
    "status",
    "payload",
    "result",
    "error",
    "metadata",
    "progress",
    "message",
    "attempt",
    "max_attempts",
    "priority",
    "worker_id",
    "lease_until_ms",
    "run_at_ms",
    "cancel_requested_at_ms",
    "parent_id",
    "root_id",
    "correlation_id",
    "created_at_ms",
    "updated_at_ms",
    "completed_at_ms",
)


def _ms(value: Any) -> int | None:
    # Some drivers return bigint as text (§2.2): every *_ms column becomes an int.
    return None if value is None else int(value)


def task_from_values(row: Sequence[Any], *, decoded_json: bool = False) -> Task:
    """Build a ``Task`` from a full row in ``ROW_COLUMNS`` order, for both dialects."""
    (
        task_id,
        name,
        queue,
        status,
        payload,
        result,
        error,
        metadata,
        progress,
        message,
        attempt,
        max_attempts,
        priority,
        worker_id,
        lease_until_ms,
        run_at_ms,
        cancel_requested_at_ms,
        parent_id,
        root_id,
        correlation_id,
        created_at_ms,
        updated_at_ms,
        completed_at_ms,
    ) = row
    if not decoded_json:
        # Leniently: a row another writer stored undecodable reads with an
        # UndecodableJSON in that field instead of failing the whole read.
        payload, result = _json.loads_column(payload), _json.loads_column(result)
        error, metadata = _json.loads_column(error), _json.loads_column(metadata)
    return Task(
        id=task_id,
        name=name,
        queue=queue,
        status=status,
        payload=payload,
        metadata=metadata if isinstance(metadata, dict | UndecodableJSON) else {},
        result=result,
        error=error,
        progress=progress,
        message=message,
        attempt=int(attempt),
        max_attempts=int(max_attempts),
        priority=int(priority),
        worker_id=worker_id,
        lease_until_ms=_ms(lease_until_ms),
        run_at_ms=int(run_at_ms),
        cancel_requested_at_ms=_ms(cancel_requested_at_ms),
        parent_id=parent_id,
        root_id=root_id,
        correlation_id=correlation_id,
        created_at_ms=int(created_at_ms),
        updated_at_ms=int(updated_at_ms),
        completed_at_ms=_ms(completed_at_ms),
    )


def undecodable(task: Task) -> bool:
    """True if a handler could not be given ``task``: its payload or metadata is undecodable."""
    return type(task.payload) is UndecodableJSON or type(task.metadata) is UndecodableJSON


def undecodable_error(task: Task) -> dict[str, Any]:
    """The error envelope of a task failed because its JSON cannot be decoded."""
    reasons = {
        name: value.reason
        for name, value in (("payload", task.payload), ("metadata", task.metadata))
        if type(value) is UndecodableJSON
    }
    said = "; ".join(f"{name}: {reason}" for name, reason in reasons.items())
    return {
        "type": "UndecodableTask",
        "code": "undecodable_json",
        "message": f"the task cannot be decoded ({said}); failed without running",
        "retryable": False,
        "details": {"fields": builtins.list(reasons), "reasons": reasons},
    }


def screen_plan(plan: Plan[T], *, top_up: bool) -> tuple[Plan[T], builtins.list[Task]]:
    """``plan`` with every draw screened: undecodable tasks are set aside, not handed on.

    Returns the screened plan and the list it fills with the tasks set aside
    (claimed by the session: the caller fails them once it is over). With
    ``top_up`` a draw that set some aside draws again for the shortfall in the
    same transaction, so the plan sees the draw it asked for (a plan that
    promised a single draw cannot, and gets a short one).
    """
    set_aside: builtins.list[Task] = []

    async def screened(draw: Draw) -> T:
        async def screened_draw(names: Sequence[str] | None, limit: int) -> builtins.list[Task]:
            kept: builtins.list[Task] = []
            wanted = limit
            while True:
                rows = await draw(names, wanted)
                bad = [task for task in rows if undecodable(task)]
                kept += [task for task in rows if not undecodable(task)] if bad else rows
                set_aside.extend(bad)
                if not bad or not top_up or len(rows) < wanted:
                    return kept
                wanted = len(bad)

        return await plan(screened_draw)

    return screened, set_aside


def encode_error(error: Mapping[str, Any], retryable: bool) -> str:
    """The envelope as JSON; a reduced envelope if it cannot be serialised (§2.6)."""
    try:
        return _json.dumps(dict(error))
    except (SerializationError, TypeError, ValueError):

        def field(key: str, default: str) -> str:
            value = None
            with contextlib.suppress(Exception):
                value = error.get(key)
            return default if value is None else str(value)

        return _json.dumps(
            {
                "type": field("type", "TaskError"),
                "code": field("code", "task_error"),
                "message": field("message", ""),
                "retryable": bool(retryable),
                "details": {},
            }
        )
