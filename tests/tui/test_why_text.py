"""The detail's "why" line for a running task whose cancel was requested."""

from __future__ import annotations

from cairnq_tui.why import why_not_running
from engine import Task

NOW = 1_700_000_000_000


def running(**changes: object) -> Task:
    fields: dict[str, object] = {
        "id": "t1",
        "name": "limited",
        "queue": "default",
        "status": "running",
        "payload": {},
        "metadata": {},
        "result": None,
        "error": None,
        "progress": None,
        "message": None,
        "attempt": 1,
        "max_attempts": 3,
        "priority": 0,
        "worker_id": "w1",
        "lease_until_ms": NOW + 20_000,
        "run_at_ms": NOW - 5_000,
        "cancel_requested_at_ms": None,
        "parent_id": None,
        "root_id": None,
        "correlation_id": None,
        "created_at_ms": NOW - 5_000,
        "updated_at_ms": NOW - 1_000,
        "completed_at_ms": None,
    }
    fields.update(changes)
    return Task(**fields)  # type: ignore[arg-type]


def test_a_requested_cancel_says_when_the_task_ends_in_plain_words() -> None:
    text = why_not_running(running(cancel_requested_at_ms=NOW - 1_000), NOW)
    assert "settle" not in text  # was "the worker ends it at its next settle": jargon
    assert "ends canceled when its handler returns or fails" in text
    assert "ctx.canceled()" in text and "lease runs out" in text
    assert "lease held by w1" in text


def test_no_cancel_no_cancel_words() -> None:
    assert "anceled" not in why_not_running(running(), NOW)
