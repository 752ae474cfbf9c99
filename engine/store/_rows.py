"""Rows in and out: a ``cairnq_tasks`` row as a ``Task``, and the error envelopes the store writes.

``task_from_values`` decodes a row for both dialects, leniently: a JSON column
another writer stored undecodable becomes an ``UndecodableJSON`` instead of
failing the read (a claim then fails that task: ``undecodable_error``).
"""

from __future__ import annotations

import builtins
import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

from engine import _json
from engine._errors import SerializationError
from engine._models import (
    Task,
    UndecodableJSON,
)

LEASE_EXPIRED_ERROR: dict[str, Any] = {
    "type": "LeaseExpired",
    "code": "lease_expired",
    "message": "task lease expired and max attempts reached",
    "retryable": False,
    "details": {},
}
LEASE_EXPIRED_JSON = _json.dumps(LEASE_EXPIRED_ERROR)


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
