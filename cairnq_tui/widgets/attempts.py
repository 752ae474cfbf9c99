"""Every attempt of a task the console knows, each marked with where it is known from.

Three sources, merged by attempt number: a hosted worker of this process (its
call in flight: attempt, start, running time; and its recent handler failures:
time, type, message; ``--worker``), the recorder's history file (failed attempts
it saw: attempt, time, type, message), and the row itself (the last error the
database keeps). Attempts below the first one known are said to be unknown:
the database keeps only the last error.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text

from cairnq_tui.formatting import age, duration, safe_text
from cairnq_tui.history import SeenFailure
from cairnq_tui.hosting import HostedStatus
from engine import Task


@dataclass(frozen=True)
class KnownAttempt:
    attempt: int | None  # None: not known (a hosted failure report without one)
    at_ms: int
    outcome: str
    error: str
    source: str


def _row_error(task: Task) -> tuple[str, str] | None:
    if not isinstance(task.error, dict):
        return None
    message = str(task.error.get("message", "")).split("\n", 1)[0]
    return str(task.error.get("type", "")), message


def known_attempts(
    task: Task, hosted: list[HostedStatus], seen: list[SeenFailure], now: int
) -> list[KnownAttempt]:
    """What is known of each attempt, oldest first (duplicates of one attempt kept
    once per source, so each source shows what it says)."""
    out: list[KnownAttempt] = []
    for status in hosted:
        snap = status.snapshot
        if snap is None:
            continue
        where = f"hosted worker {snap.worker_id}"
        for call in snap.calls:
            for t in call.tasks:
                if t.task_id == task.id:
                    out.append(
                        KnownAttempt(
                            t.attempt,
                            call.started_at_ms,
                            f"running for {duration(max(0, now - call.started_at_ms))}",
                            "",
                            where,
                        )
                    )
        for report in snap.recent_failures:
            if report.task_id == task.id:
                line = report.message.splitlines()[0] if report.message else ""
                error = f"{report.exception_type}: {line}"
                out.append(KnownAttempt(report.attempt, report.at_ms, "failed", error, where))
    for failure in seen:
        outcome = "failed" if failure.status == "failed" else "failed, retried"
        out.append(
            KnownAttempt(
                failure.attempt,
                failure.at_ms,
                outcome,
                f"{failure.error_type or ''}: {failure.message or ''}",
                "recorder",
            )
        )
    row_error = _row_error(task)
    error = f"{row_error[0]}: {row_error[1]}" if row_error is not None else ""
    at = task.completed_at_ms or task.updated_at_ms
    if task.status == "running":
        worker = f" on {task.worker_id}" if task.worker_id else ""
        out.append(KnownAttempt(task.attempt, task.updated_at_ms, f"running{worker}", "", "row"))
    elif task.status == "failed":
        out.append(KnownAttempt(task.attempt, at, "failed", error, "row"))
    elif task.status == "queued" and row_error is not None and task.attempt > 0:
        out.append(KnownAttempt(task.attempt, at, "failed, retry due", error, "row"))
    elif task.status == "succeeded" and task.attempt > 0:
        # (an error a succeeded row still holds is an earlier attempt's)
        out.append(KnownAttempt(task.attempt, at, task.status, "", "row"))
    elif task.status == "canceled" and task.attempt > 0:
        out.append(KnownAttempt(task.attempt, at, task.status, error, "row"))
    return _merge(out)


def _merge(found: list[KnownAttempt]) -> list[KnownAttempt]:
    """One line per numbered attempt and error: sources that agree are joined
    (the later source's outcome kept: the row says what is true now)."""
    merged: dict[tuple[int, str] | int, KnownAttempt] = {}
    for i, a in enumerate(found):
        key: tuple[int, str] | int = (a.attempt, a.error) if a.attempt is not None else -1 - i
        before = merged.get(key)
        if before is None:
            merged[key] = a
        else:
            merged[key] = KnownAttempt(
                a.attempt,
                min(before.at_ms, a.at_ms),
                a.outcome,
                a.error,
                f"{before.source} + {a.source}",
            )
    return sorted(merged.values(), key=lambda a: (a.at_ms, a.attempt or 0))


def attempts_text(
    task: Task, hosted: list[HostedStatus], seen: list[SeenFailure], now: int
) -> Text:
    """The attempt history as the detail screen shows it."""
    known = known_attempts(task, hosted, seen, now)
    text = Text("Attempts", style="bold")
    text.append(f"  ({task.attempt} of {task.max_attempts} started)", style="dim")
    numbered = sorted({a.attempt for a in known if a.attempt is not None})
    first = numbered[0] if numbered else task.attempt + 1
    if task.attempt == 0:
        text.append("\n  none yet")
        return text
    if first > 1:
        unknown = "attempt 1" if first == 2 else f"attempts 1-{first - 1}"
        text.append(
            f"\n  {unknown}: not known (the database keeps only the last error, and "
            "the recorder did not see them)",
            style="italic",
        )
    for a in known:
        text.append("\n  ")
        text.append(f"attempt {a.attempt}" if a.attempt is not None else "attempt ?", "bold")
        text.append(f"  {age(a.at_ms, now)} ago  ")
        style = (
            "red"
            if a.outcome.startswith("failed")
            else "green"
            if a.outcome == "succeeded"
            else "yellow"
        )
        text.append(a.outcome, style)
        if a.error:
            text.append("  ")
            text.append_text(safe_text(a.error, limit=120))
        text.append(f"  [{a.source}]", style="dim")
    return text
