"""A deterministic database for the triage views (Failures, Metrics, Audit,
Workers): the demo database plus failures of several names and errors spread
over the last week, with volatile parts (numbers, ids) that the groups mask."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from console_states import MINUTE, NOW, demo_rows, insert, migrate, task_row

HOUR = 60 * MINUTE


def _failed(n: int, ago_min: float, name: str, etype: str, message: str, **extra: Any) -> Any:
    return task_row(
        n,
        ago_min + 1,
        name=name,
        queue=extra.pop("queue", "billing"),
        status="failed",
        attempt=3,
        worker_id="worker_C",
        error={"type": etype, "code": "handler_error", "message": message, "retryable": False},
        completed_at_ms=NOW - int(ago_min * MINUTE),
        run_at_ms=NOW - int((ago_min + 1) * MINUTE),
        **extra,
    )


def triage_rows() -> tuple[list[dict[str, Any]], dict[str, str]]:
    rows, keys = demo_rows()
    n = 100
    # charge_card: a timeout every few minutes over the last hour, order numbers varying.
    for i in range(14):
        rows.append(
            _failed(n, 3 + i * 4, "charge_card", "TimeoutError", f"order {4000 + i} timed out")
        )
        n += 1
    # send_welcome: bounced addresses over the last day.
    for i in range(6):
        rows.append(
            _failed(
                n,
                90 + i * 200,
                "send_welcome",
                "SMTPRecipientsRefused",
                f"550 mailbox user{i}@example.com unavailable (ref 0x{0x7F3A2B10 + i:x})",
                queue="emails",
            )
        )
        n += 1
    # build_report: one old failure, days ago (only in 7 d and all).
    rows.append(_failed(n, 3 * 24 * 60, "build_report", "KeyError", "'quarter'", queue="reports"))
    return rows, keys


def build_triage_db(path: Path) -> Path:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    migrate(path)
    rows, keys = triage_rows()
    insert(path, rows, keys)
    return path
