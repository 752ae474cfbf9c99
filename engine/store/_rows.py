"""Rows in and out: a ``cairnq_tasks`` row as a ``Task``, and the error envelopes the store writes.

``task_from_values`` decodes a row for both dialects, leniently: a JSON column
another writer stored undecodable becomes an ``UndecodableJSON`` instead of
failing the read (a claim then fails that task: ``undecodable_error``).
"""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
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


# ``Task`` is a frozen dataclass: its ``__init__`` sets each of its 23 fields
# through ``object.__setattr__``, which was half of a ``get``'s own cost. Rows
# are read far more often than anything else is built, so ``task_from_values``
# fills the slots directly through their descriptors instead (what that
# ``__init__`` does, without the keyword call and the 23 lookups). Task has no
# ``__post_init__`` and no defaults to apply; tests/engine/test_rows.py holds
# the two ways of building a Task equal.
_SET = {name: getattr(Task, name).__set__ for name in ROW_COLUMNS}
assert set(_SET) == {f.name for f in dataclasses.fields(Task)}
assert not hasattr(Task, "__post_init__")
(
    _set_id,
    _set_name,
    _set_queue,
    _set_status,
    _set_payload,
    _set_result,
    _set_error,
    _set_metadata,
    _set_progress,
    _set_message,
    _set_attempt,
    _set_max_attempts,
    _set_priority,
    _set_worker_id,
    _set_lease_until_ms,
    _set_run_at_ms,
    _set_cancel_requested_at_ms,
    _set_parent_id,
    _set_root_id,
    _set_correlation_id,
    _set_created_at_ms,
    _set_updated_at_ms,
    _set_completed_at_ms,
) = (_SET[name] for name in ROW_COLUMNS)
_new = object.__new__
_loads = _json.loads_column


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
        payload, result = _loads(payload), _loads(result)
        error, metadata = _loads(error), _loads(metadata)
    task: Task = _new(Task)
    _set_id(task, task_id)
    _set_name(task, name)
    _set_queue(task, queue)
    _set_status(task, status)
    _set_payload(task, payload)
    _set_result(task, result)
    _set_error(task, error)
    _set_metadata(task, metadata if isinstance(metadata, dict | UndecodableJSON) else {})
    _set_progress(task, progress)
    _set_message(task, message)
    # Some drivers return bigint as text (§2.2): every integer column becomes an int.
    _set_attempt(task, int(attempt))
    _set_max_attempts(task, int(max_attempts))
    _set_priority(task, int(priority))
    _set_worker_id(task, worker_id)
    _set_lease_until_ms(task, None if lease_until_ms is None else int(lease_until_ms))
    _set_run_at_ms(task, int(run_at_ms))
    _set_cancel_requested_at_ms(
        task, None if cancel_requested_at_ms is None else int(cancel_requested_at_ms)
    )
    _set_parent_id(task, parent_id)
    _set_root_id(task, root_id)
    _set_correlation_id(task, correlation_id)
    _set_created_at_ms(task, int(created_at_ms))
    _set_updated_at_ms(task, int(updated_at_ms))
    _set_completed_at_ms(task, None if completed_at_ms is None else int(completed_at_ms))
    return task


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
