"""Submitting: a submit validated and encoded (``NewTask``), the keyed conflict table, and
the store's submit methods (``SubmitStore``), which settle, then signal.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from engine import _json, _rules
from engine._errors import SerializationError
from engine._ids import new_task_id
from engine._models import (
    CONFLICTS,
    LIVE_STATUSES,
    SubmitOutcome,
)
from engine._signatures import prepared_by, task_of
from engine.store._store_core import StoreCore


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


KeyedChoice = Literal["reuse", "reject", "insert", "cancel-and-insert"]


def keyed_choice(conflict: str, holder_status: str | None) -> KeyedChoice:
    """The keyed-submit conflict table (§4.3), for both dialects' transactions.

    ``holder_status``: the status of the task the key points at (None: the key
    is free, or points at a purged task). ``reuse`` hands back a live holder;
    ``reuse-succeeded`` also a succeeded one; ``reject`` refuses any holder
    (``AlreadyExists``); ``replace`` cancels a live holder; every other case
    inserts a new task and moves the key to it.
    """
    if holder_status is None:
        return "insert"
    if conflict == "reject":
        return "reject"
    live = holder_status in LIVE_STATUSES
    if conflict == "replace":
        return "cancel-and-insert" if live else "insert"
    if live or (conflict == "reuse-succeeded" and holder_status == "succeeded"):
        return "reuse"
    return "insert"


def insert_params(new: NewTask) -> dict[str, Any]:
    """``insert_task``'s parameters, the same names on both dialects."""
    return {
        "id": new.id,
        "name": new.name,
        "queue": new.queue,
        "payload": new.payload_json,
        "metadata": new.metadata_json,
        "max_attempts": new.max_attempts,
        "priority": new.priority,
        "parent_id": new.parent_id,
        "root_id": new.root_id,
        "correlation_id": new.correlation_id,
        "delay_ms": new.delay_ms,
    }


class SubmitStore(StoreCore):
    """Submits: validation and encoding, the gate, the keyed conflict table, signals."""

    # -- submit ----------------------------------------------------------------

    def _prepare_submit(
        self,
        *,
        # where it goes, and what it carries
        name: str,
        queue: str = "default",
        payload: Any = None,
        metadata: Mapping[str, Any] | None = None,
        # when and how often it runs
        delay_ms: int = 0,
        priority: int = 0,
        max_attempts: int = 3,
        # the key it holds, and what a holder already there means
        key: str | None = None,
        conflict: str = "reuse",
        # its family
        root_id: str | None = None,
        parent_id: str | None = None,
        correlation_id: str | None = None,
    ) -> NewTask:
        """Validate and encode a submit without I/O (ValueError/SerializationError).

        Its keywords are ``submit``'s and ``submit_outcome``'s, declared here once
        (``engine._signatures``).
        """
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

    @prepared_by(_prepare_submit)
    async def submit_outcome(self, new: NewTask) -> SubmitOutcome:
        """Insert a task, or resolve a keyed submit by its conflict strategy (§4.3),
        answering what it did: created, reused or replaced, and the task.

        Raises:
            ValueError: bad arguments (nothing written).
            SerializationError: payload or metadata has no faithful JSON form.
            AlreadyExists: ``conflict="reject"`` and the key holds a task (its
                ``task_id`` and ``status`` say which).
            QueueFull: the backpressure gate gave up.
        """
        if self._gate is not None:
            await self._gate.admit(self, new.queue)
        outcome = await self._submit(new)
        # Settled; now the signals: a queued task, and a holder a replace canceled.
        if outcome.canceled:
            self._after_write(outcome.previous)
        if outcome.action != "reused":
            self.signals.queued(outcome.task.queue)
        return outcome

    submit = task_of(
        submit_outcome,
        """Insert a task, or resolve a keyed submit by its conflict strategy (§4.3).

        ``submit_outcome`` also says what the submit did.

        Raises:
            ValueError: bad arguments (nothing written).
            SerializationError: payload or metadata has no faithful JSON form.
            AlreadyExists: ``conflict="reject"`` and the key holds a task.
            QueueFull: the backpressure gate gave up.
        """,
    )

    @abc.abstractmethod
    async def _submit(self, new: NewTask) -> SubmitOutcome:
        """insert_task, or the keyed transaction deciding by ``keyed_choice``.

        Signals nothing (``submit_outcome`` does, after it).
        """
