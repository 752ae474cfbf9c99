"""``task_from_values`` fills a Task's slots directly: the Task its constructor builds."""

from __future__ import annotations

import dataclasses

import pytest

from engine._json import UndecodableJSON
from engine._models import Task
from engine.store._rows import ROW_COLUMNS, task_from_values

_ROW = {
    "id": "01JTASK",
    "name": "emails.send",
    "queue": "default",
    "status": "failed",
    "payload": '{"to": ["a@example.com"], "n": 1.5}',
    "result": "[1, 2]",
    "error": '{"type": "Boom", "code": "boom", "message": "m", "retryable": false, "details": {}}',
    "metadata": '{"tenant": "t1"}',
    "progress": 0.5,
    "message": "half way",
    "attempt": 2,
    "max_attempts": 3,
    "priority": -4,
    "worker_id": "w1",
    "lease_until_ms": "1700000000123",  # bigint as text, as some drivers return it
    "run_at_ms": 1700000000000,
    "cancel_requested_at_ms": 1700000000001,
    "parent_id": "01JPARENT",
    "root_id": "01JROOT",
    "correlation_id": "corr",
    "created_at_ms": 1699999999999,
    "updated_at_ms": "1700000000002",
    "completed_at_ms": 1700000000003,
}


def _constructed(values: dict[str, object]) -> Task:
    return Task(
        **{
            **values,
            "payload": {"to": ["a@example.com"], "n": 1.5},
            "result": [1, 2],
            "error": {
                "type": "Boom",
                "code": "boom",
                "message": "m",
                "retryable": False,
                "details": {},
            },
            "metadata": {"tenant": "t1"},
            "lease_until_ms": 1700000000123,
            "updated_at_ms": 1700000000002,
        }
    )


def test_a_full_row_reads_as_the_constructed_task() -> None:
    task = task_from_values([_ROW[c] for c in ROW_COLUMNS])
    assert task == _constructed(_ROW)
    assert {f.name: type(getattr(task, f.name)) for f in dataclasses.fields(Task)} == {
        f.name: type(getattr(_constructed(_ROW), f.name)) for f in dataclasses.fields(Task)
    }
    assert hash(task.id) == hash("01JTASK")


def test_nulls_and_a_non_object_metadata() -> None:
    row = dict(_ROW, result=None, error=None, metadata="[1]", progress=None, message=None)
    row.update(worker_id=None, lease_until_ms=None, cancel_requested_at_ms=None)
    row.update(parent_id=None, correlation_id=None, completed_at_ms=None)
    task = task_from_values([row[c] for c in ROW_COLUMNS])
    assert task.result is None and task.error is None
    assert task.metadata == {}
    assert task.lease_until_ms is None and task.completed_at_ms is None
    assert task.cancel_requested_at_ms is None


def test_undecodable_json_reads_as_undecodable() -> None:
    row = dict(_ROW, payload="{not json", metadata="{nor this")
    task = task_from_values([row[c] for c in ROW_COLUMNS])
    assert type(task.payload) is UndecodableJSON
    assert type(task.metadata) is UndecodableJSON


def test_decoded_json_is_taken_as_given() -> None:
    row = dict(_ROW, payload={"x": 1}, result=None, error=None, metadata={"m": 2})
    task = task_from_values([row[c] for c in ROW_COLUMNS], decoded_json=True)
    assert task.payload == {"x": 1} and task.metadata == {"m": 2}


def test_the_task_stays_frozen() -> None:
    task = task_from_values([_ROW[c] for c in ROW_COLUMNS])
    with pytest.raises(dataclasses.FrozenInstanceError):
        task.status = "queued"  # type: ignore[misc]
    assert dataclasses.replace(task, status="queued").status == "queued"
