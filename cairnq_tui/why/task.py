"""The "why is this not running" line of the task detail, from a task and a clock."""

from __future__ import annotations

from datetime import UTC, datetime

from cairnq_tui.formatting import clean, duration, quoted
from engine import Task


def clock_time(ms: int) -> str:
    """``YYYY-MM-DD HH:MM:SS UTC``: always with the date, so no reader has to guess the day."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def why_not_running(task: Task, now_ms: int) -> str:
    """One sentence on what the task waits for (or how it ended)."""
    status = task.status
    if status == "queued":
        if task.run_at_ms > now_ms:
            when = f"due at {clock_time(task.run_at_ms)} (in {duration(task.run_at_ms - now_ms)})"
            if task.attempt > 0:
                return (
                    f"Queued: attempt {task.attempt} of {task.max_attempts} failed; "
                    f"next retry {when}."
                )
            return f"Queued, delayed: {when}."
        waited = duration(now_ms - task.run_at_ms)
        retry = f" (attempt {task.attempt + 1} of {task.max_attempts})" if task.attempt else ""
        return (
            f"Queued and due for {waited}{retry}: waiting for a worker on queue "
            f"{quoted(task.queue)} to claim it."
        )
    if status == "running":
        parts = []
        if task.cancel_requested_at_ms is not None:
            parts.append(
                f"Cancel requested at {clock_time(task.cancel_requested_at_ms)}: it ends "
                "canceled when its handler returns or fails (handlers that check "
                "ctx.canceled() stop early) or when its lease runs out."
            )
        lease = task.lease_until_ms
        worker = clean(task.worker_id or "?")
        if lease is not None and lease > now_ms:
            parts.append(
                f"Running: lease held by {worker} until {clock_time(lease)} "
                f"({duration(lease - now_ms)} left), attempt {task.attempt} of {task.max_attempts}."
            )
        elif lease is not None:
            parts.append(
                f"Lease of {worker} expired {duration(now_ms - lease)} ago: awaiting recovery "
                f"(the next claim requeues it, attempt {task.attempt} of {task.max_attempts})."
            )
        return " ".join(parts)
    done = task.completed_at_ms
    at = f" at {clock_time(done)}" if done is not None else ""
    if status == "succeeded":
        return f"Finished: succeeded{at}."
    if status == "canceled":
        return f"Finished: canceled{at}; retry requeues it."
    message = ""
    if isinstance(task.error, dict):
        message = f": {clean(task.error.get('type', ''))}: {clean(task.error.get('message', ''))}"
    return (
        f"Finished: failed{at} after attempt {task.attempt} of {task.max_attempts}{message}; "
        "retry requeues it."
    )
