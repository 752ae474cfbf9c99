"""The store's core: lifecycle, the gate hook, helpers, wakeups and named reads.

``StoreCore`` is the root of ``TaskStore``'s chain (``_submits`` → ``_owned_writes`` →
``_claims`` → ``_base``), each link one job; a dialect implements the
``_``-prefixed primitives each declares.
"""

from __future__ import annotations

import abc
import builtins
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Self

from engine import _json, _rules
from engine._models import (
    TERMINAL_STATUSES,
    Task,
)
from engine._sql import Dialect, statement
from engine.store._rows import ROW_COLUMNS, task_from_values
from engine.store._signals import Claimer, Signals, Wake, WatchSignal


@dataclass(frozen=True, slots=True)
class StoreCapabilities:
    """What a store offers beyond the protocol's operations, declared by its class.

    The worker reads these flags rather than probing the store for methods.
    """

    #: ``claim_session_completing``: settle finished tasks and claim their
    #: replacements in one transaction (one commit instead of two).
    completing_claim: bool = False
    #: A completing claim's ``single_draw`` sends the COMMIT with its one draw
    #: (Postgres, ``_completing_claim_one_draw``): that draw cannot be topped up
    #: by a second one. Without it ``single_draw`` changes nothing.
    single_draw_commits: bool = False
    #: A claim right after a claimable signal (``claim_session(signalled=True)``)
    #: opens its transaction without the probe: the probe costs about what an
    #: empty transaction costs (Postgres: a round trip and a large plan).
    signalled_claims_skip_probe: bool = False


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


class StoreCore(abc.ABC):
    """What every part of a store shares: identity, signals, gate, lifecycle, helpers."""

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

    async def __aenter__(self) -> Self:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- gate ------------------------------------------------------------------

    def _set_queue_gate(self, gate: Any) -> None:
        """Attach a backpressure gate (``engine._gate.QueueGate``) to every submit."""
        self._gate = gate

    # -- wakeups -------------------------------------------------------------------

    def arm_claim_wake(self, queues: Sequence[str], claimer: Claimer | None = None) -> Wake:
        """Arm, synchronously, a wake for a task that may be claimable on ``queues``.

        Arm it before looking at the database: a write after the look then
        fires it. ``close()`` it when done. A dialect adds its own sources
        (another process's commits) to the same wake. ``claimer``: whose last
        look a signal is measured against (``Claimer``; a worker passes its
        own, as to its claims).
        """
        return self.signals.arm_claim(queues, claimer)

    def arm_task_done_wake(self, task_id: str) -> Wake:
        """Arm, synchronously, a wake for ``task_id`` going terminal (see ``arm_claim_wake``)."""
        return self.signals.arm_done(task_id)

    async def claim_wake(
        self, queues: Sequence[str], timeout_ms: float, *, claimer: Claimer | None = None
    ) -> bool:
        """Sleep until a task may be claimable on ``queues`` or the timeout passes.

        ``claimer``: as for ``arm_claim_wake``.
        """
        wake = self.arm_claim_wake(queues, claimer)
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
        self, name: str, params: Mapping[str, Any], *, background: bool = False
    ) -> builtins.list[dict[str, Any]]:
        """Run the read-only statement ``sql/<dialect>/<name>.sql``; rows as dicts.

        The file runs as written, its optional filters (``NULL`` = any) bound
        like every other parameter (each dialect's files seek an index for the
        filters given: see docs/architecture.md). Used by
        ``engine.Inspector``; never by write paths. ``background``: a read nobody
        waits on (a recorder's sample); SQLite runs it on a connection and thread
        of its own, so it never delays the other reads (Postgres: the pool does).
        """

    def _read_statement_text(self, name: Any) -> str:
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
    def _task_from_row(row: Mapping[str, Any], *, decoded_json: bool = False) -> Task:
        """Build a ``Task`` from a full row keyed by column (JSON as text unless
        ``decoded_json``)."""
        return task_from_values([row[column] for column in ROW_COLUMNS], decoded_json=decoded_json)
