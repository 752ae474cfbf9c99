"""Deterministic databases for the console's tests, snapshots and screenshots.

Rows are written with fixed ids and times (stdlib sqlite3 into a database the
engine migrated), and the app runs on a ``FixedClock`` at ``NOW``: every age,
countdown and sparkline is the same on every run. ``screenshots/make_screenshots.py``
builds its pictures from these same states.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from cairnq_tui.app import ConsoleApp, Settings
from cairnq_tui.clock import FixedClock
from cairnq_tui.target import Target
from cairnq_tui.widgets.tasks_view import TasksView
from engine import SQLiteStore

#: 2026-01-01 00:00:00 UTC.
NOW = 1_767_225_600_000
MINUTE = 60_000
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
COLUMNS = (
    "id, name, queue, status, payload, result, error, metadata, progress, message, attempt, "
    "max_attempts, priority, worker_id, lease_until_ms, run_at_ms, cancel_requested_at_ms, "
    "parent_id, root_id, correlation_id, created_at_ms, updated_at_ms, completed_at_ms"
)

_PLACEHOLDERS = ", ".join(":" + name.strip() for name in COLUMNS.split(","))


def fixed_id(ms: int, n: int) -> str:
    """A valid task id for creation time ``ms``, its random part replaced by ``n``."""
    value = (ms << 80) | n
    digits = []
    for _ in range(26):
        digits.append(_CROCKFORD[value & 31])
        value >>= 5
    return "task_" + "".join(reversed(digits))


def migrate(path: Path) -> None:
    """An empty cairnq database, migrated by the engine."""

    async def run() -> None:
        store = SQLiteStore(path)
        await store.connect()
        await store.close()

    # A thread of its own: callers may already run an event loop (async tests).
    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, run()).result()


def task_row(n: int, created_ago_min: float, **fields: Any) -> dict[str, Any]:
    created = NOW - int(created_ago_min * MINUTE)
    task_id = fields.pop("id", None) or fixed_id(created, n)
    row: dict[str, Any] = {
        "id": task_id,
        "name": "job",
        "queue": "default",
        "status": "queued",
        "payload": {},
        "result": None,
        "error": None,
        "metadata": {},
        "progress": None,
        "message": None,
        "attempt": 0,
        "max_attempts": 3,
        "priority": 0,
        "worker_id": None,
        "lease_until_ms": None,
        "run_at_ms": created,
        "cancel_requested_at_ms": None,
        "parent_id": None,
        "root_id": task_id,
        "correlation_id": None,
        "created_at_ms": created,
        "updated_at_ms": created,
        "completed_at_ms": None,
    }
    row.update(fields)
    return row


def insert(path: Path, rows: list[dict[str, Any]], keys: dict[str, str]) -> None:
    """Write ``rows`` and ``keys`` ({key: task id}) in one transaction."""
    conn = sqlite3.connect(path)
    with conn:
        for row in rows:
            values = dict(row)
            for column in ("payload", "metadata", "result", "error"):
                if values[column] is not None:
                    values[column] = json.dumps(values[column], separators=(",", ":"))
            conn.execute(f"insert into cairnq_tasks ({COLUMNS}) values ({_PLACEHOLDERS})", values)
        by_id = {r["id"]: r for r in rows}
        for key, task_id in keys.items():
            moved = by_id[task_id]["created_at_ms"]
            conn.execute(
                "insert into cairnq_task_keys values (?, ?, ?, ?)", (key, task_id, moved, moved)
            )
    conn.close()


DECLINED = {
    "type": "CardDeclined",
    "code": "task_error",
    "message": "card ending 4242 was declined",
    "retryable": False,
    "details": {"processor": "acme", "attempts": [1, 2, 3]},
}


def demo_rows() -> tuple[list[dict[str, Any]], dict[str, str]]:
    """A small, varied database: every status, keys, leases (one expired), lineage, junk."""
    parent = task_row(
        5,
        9,
        name="build_report",
        queue="reports",
        status="running",
        worker_id="worker_B",
        attempt=1,
        lease_until_ms=NOW + 25_000,
        cancel_requested_at_ms=NOW - 3_000,
        payload={"report": "q4", "pages": 40},
    )
    rows = [
        task_row(1, 1, name="send_welcome", queue="emails", payload={"user": "ada", "lang": "en"}),
        task_row(
            2,
            2,
            name="send_welcome",
            queue="emails",
            run_at_ms=NOW + 5 * MINUTE,
            payload={"user": "grace"},
        ),
        task_row(
            3,
            3,
            name="send_digest",
            queue="emails",
            status="running",
            worker_id="worker_A",
            attempt=1,
            lease_until_ms=NOW + 12_000,
            progress=0.4,
            message="rendering 40/100",
            payload={"digest": "weekly", "recipients": 100},
        ),
        task_row(
            4,
            4,
            name="build_report",
            queue="reports",
            status="running",
            worker_id="worker_B",
            attempt=2,
            lease_until_ms=NOW - 8_000,
            payload={"report": "q3"},
        ),
        parent,
        task_row(
            6,
            6,
            name="charge_card",
            queue="billing",
            status="succeeded",
            worker_id="worker_C",
            attempt=1,
            progress=1.0,
            result={"charged": 1299, "currency": "EUR"},
            completed_at_ms=NOW - 2 * MINUTE,
            payload={"invoice": 1001, "amount": 1299},
        ),
        task_row(
            7,
            7,
            name="charge_card",
            queue="billing",
            status="failed",
            worker_id="worker_C",
            attempt=3,
            error=DECLINED,
            completed_at_ms=NOW - 3 * MINUTE,
            payload={"invoice": 1002, "amount": 5000},
        ),
        task_row(
            8,
            8,
            name="refund",
            queue="billing",
            status="canceled",
            completed_at_ms=NOW - 4 * MINUTE,
            payload={"invoice": 77},
        ),
        task_row(
            9,
            0.5,
            name="[bold]evil[/bold]\x1b[31m",
            queue="emails",
            message="[red]not markup[/red]\x07",
            payload={"x": "[b]y[/b]"},
        ),
        task_row(
            10,
            8.5,
            name="render_chart",
            queue="reports",
            parent_id=parent["id"],
            root_id=parent["id"],
            payload={"chart": 3},
        ),
        task_row(
            11,
            10,
            name="charge_card",
            queue="billing",
            attempt=1,
            run_at_ms=NOW + 30_000,
            error={**DECLINED, "retryable": True, "message": "gateway timeout"},
            payload={"invoice": 1003, "amount": 700},
        ),
    ]
    for i in range(12):
        minute = 1 + i % 10
        rows.append(
            task_row(
                20 + i,
                12 + minute,
                name="send_welcome",
                queue="emails",
                status="succeeded",
                attempt=1,
                progress=1.0,
                worker_id="worker_A",
                completed_at_ms=NOW - minute * MINUTE + 1_000,
                payload={"user": f"u{i}"},
            )
        )
    keys = {
        "signup-ada": rows[0]["id"],
        "invoice-1001": rows[5]["id"],
        "invoice-1002": rows[6]["id"],
        "refund-77": rows[7]["id"],
        "report-q4": parent["id"],
    }
    return rows, keys


def build_demo_db(path: Path) -> Path:
    """The demo database at ``path`` (replaced if present)."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    migrate(path)
    rows, keys = demo_rows()
    insert(path, rows, keys)
    return path


def demo_app(path: Path, *, read_only: bool = False, **settings: Any) -> ConsoleApp:
    """The console on ``path`` with a frozen clock and stopwatch, as snapshots need."""
    store = SQLiteStore(path, read_only=read_only, migrate=not read_only)
    target = Target(str(path), "sqlite", "demo.db")
    options: dict[str, Any] = {"refresh_s": 3600.0, **settings}
    return ConsoleApp(
        store,
        Settings(target=target, read_only=read_only, **options),
        clock=FixedClock(NOW),
        measure=lambda: 0.0,
    )


#: Each pictured state: the keys pressed after launch on the demo database.
VIEWS: dict[str, tuple[str, ...]] = {
    "tasks": (),
    "queues": ("2",),
    "leases": ("3",),
    "keys": ("4",),
    "detail": ("down", "down", "down", "enter"),
    "help": ("question_mark",),
    "submit": ("n",),
}
SNAPSHOT_SIZE = (150, 40)


def press(*keys: str) -> Any:
    """A ``run_before`` for snapshots: settle, press ``keys``, settle, stop cursor blink."""

    async def run_before(pilot: Any) -> None:
        from textual.widgets import Input

        await settle(pilot)
        for key in keys:
            await pilot.press(key)
            await settle(pilot)
        for widget in pilot.app.screen.query(Input):
            widget.cursor_blink = False

    return run_before


async def settle(pilot: Any) -> None:
    """Wait until the app is connected and its last refresh (and any control) is drawn."""
    app = pilot.app
    calm = 0
    for _ in range(500):
        await pilot.pause(0.01)
        busy = [
            w
            for w in app.workers
            if w.group in {"control", "refresh", "connect", "task-keys"} and w.is_running
        ]
        keys_pending = any(
            view.keys_pending for screen in app.screen_stack for view in screen.query(TasksView)
        )
        quiet = app.connected and app.ticks and not app._in_flight and not busy
        # Quiet for several polls in a row: under load a key lookup or a refresh
        # can be scheduled just after a single quiet look.
        calm = calm + 1 if quiet and not keys_pending else 0
        if calm >= 5:
            break
    await pilot.pause(0.05)
    # A table whose columns widened scrolls its cursor into view once more after the layout.
    await pilot.pause()


async def refreshed(pilot: Any) -> None:
    """Refresh the visible view now and wait until it is drawn."""
    await settle(pilot)
    pilot.app.refresh_now(force=True)
    await settle(pilot)


async def fill_submit(
    pilot: Any, *, name: str, payload: str, key: str = "", conflict: str = "reuse"
) -> Any:
    """Fill the open submit dialog's fields (after ``n``)."""
    from textual.widgets import Input, TextArea

    from cairnq_tui.screens.submit import SubmitScreen

    screen = pilot.app.screen
    assert isinstance(screen, SubmitScreen)
    screen.query_one("#name", Input).value = name
    screen.query_one("#payload", TextArea).text = payload
    screen.query_one("#key", Input).value = key
    screen.query_one("#conflict").value = conflict  # type: ignore[attr-defined]
    await pilot.pause()
    return screen
