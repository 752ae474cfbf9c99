"""A deterministic hosted demo worker, for the hosted views' snapshots and screenshots.

The registrations, resources and limits are the real demo worker's (``make_worker``
builds it, unstarted, and its ``snapshot()`` is taken); what it is doing at
``NOW`` — the calls in flight, the gpu lock and who waits on it, the last poll's
quotas, a retried failure, the waits — is fixed here, with fixed ids and times,
so every picture is the same on every run. ``StillHost`` hands these statuses
to the console as a ``WorkerHost`` would.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

from console_states import NOW, fixed_id, insert, task_row

from cairnq_tui.app import ConsoleApp, Settings
from cairnq_tui.clock import FixedClock
from cairnq_tui.demo import make_worker
from cairnq_tui.hosting import HostedStatus
from cairnq_tui.target import Target
from engine import SQLiteStore
from engine.snapshots import (
    CallSnapshot,
    CallTaskSnapshot,
    ErrorReport,
    ResourceHolder,
    WaitSnapshot,
    WorkerSnapshot,
)

SPEC = "cairnq_tui.demo:make_worker"
SECOND = 1_000


def tid(n: int, ago_s: float = 60) -> str:
    return fixed_id(NOW - int(ago_s * SECOND), 900 + n)


def _call(
    call_id: int, name: str, ids: list[str], started_s_ago: float, **task: Any
) -> CallSnapshot:
    started = NOW - int(started_s_ago * SECOND)
    tasks = tuple(
        CallTaskSnapshot(
            task_id=i,
            attempt=task.get("attempt", 1),
            settled=False,
            lost=False,
            cancel_requested=task.get("cancel", False),
            progress=task.get("progress"),
            message=task.get("message"),
        )
        for i in ids
    )
    return CallSnapshot(
        call_id=call_id,
        name=name,
        task_ids=tuple(ids),
        started_at_ms=started,
        lease_until_ms=started + 10 * SECOND,
        last_heartbeat_ms=started + 3 * SECOND if started_s_ago > 3 else None,
        lost=False,
        settled=False,
        cancel_requested=task.get("cancel", False),
        bytes=0,
        tasks=tasks,
    )


CALLS = (
    _call(41, "report.build", [tid(1, 300)], 5.2, progress=7 / 12, message="section 7 of 12"),
    _call(57, "render", [tid(2, 40)], 1.3),
    _call(60, "thumbnail", [tid(3, 30)], 2.1),
    _call(61, "thumbnail", [tid(4, 30)], 0.9, cancel=True),
    _call(63, "index.update", [tid(5, 20)], 0.2),
    _call(64, "embed", [tid(10 + i, 10) for i in range(32)], 0.1),
)

FAILURE_TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "cairnq_tui/demo.py", line 131, in fetch_flaky\n'
    "    raise ConnectionError(f\"upstream {payload.get('url')} timed out\")\n"
    "ConnectionError: upstream https://example.invalid/812 timed out (attempt 2)\n"
)

REPORTS = (
    ErrorReport(
        at_ms=NOW - 4 * SECOND,
        phase="handler fetch.flaky",
        task_id=tid(6, 50),
        exception_type="ConnectionError",
        message="upstream https://example.invalid/812 timed out (attempt 2)",
        traceback=FAILURE_TRACEBACK,
    ),
    ErrorReport(
        at_ms=NOW - 9 * SECOND,
        phase="handler fetch.flaky",
        task_id=tid(6, 50),
        exception_type="ConnectionError",
        message="upstream https://example.invalid/812 timed out (attempt 1)",
        traceback=FAILURE_TRACEBACK.replace("attempt 2", "attempt 1"),
    ),
)
ON_ERROR = (
    ErrorReport(
        at_ms=NOW - 75 * SECOND,
        phase="claim",
        task_id=None,
        exception_type="StoreUnavailable",
        message="database is locked (retried)",
        traceback="Traceback (most recent call last):\nStoreUnavailable: database is locked\n",
    ),
)

WAITS = [
    WaitSnapshot(
        wait_id=3,
        kind="ctx.wait",
        subject=tid(20, 12),
        key=None,
        started_at_ms=NOW - 11 * SECOND,
        deadline_ms=NOW + 49 * SECOND,
        task_id=tid(20, 12),
        last_status="queued",
        replace_count=0,
        beats=14,
    ),
    WaitSnapshot(
        wait_id=7,
        kind="wait_by_key",
        subject="doc:3",
        key="doc:3",
        started_at_ms=NOW - 6 * SECOND,
        deadline_ms=NOW + 14 * SECOND,
        task_id=tid(21, 2),
        last_status="queued",
        replace_count=2,
        beats=9,
    ),
]

#: Quotas of the last poll: (offered, claimed, shortfall), per name.
POLL = {
    "embed": (32, 32, "worker full"),
    "render": (0, 0, "resource saturated"),
    "compare": (0, 0, "resource saturated"),
    "index.update": (1, 1, "nothing due"),
    "thumbnail": (0, 0, "own cap"),
    "fetch.flaky": (1, 0, "nothing due"),
    "report.build": (1, 0, "nothing due"),
    "publish": (1, 0, "nothing due"),
    "notify": (1, 0, "nothing due"),
}
#: Queued per name in the database at NOW (what the backlog column counts).
BACKLOG = {"render": 3, "compare": 2, "thumbnail": 4, "embed": 40, "notify": 2}


def _registered() -> WorkerSnapshot:
    """The real demo worker's registrations (unstarted, so nothing in flight)."""

    async def build() -> WorkerSnapshot:
        return make_worker(SQLiteStore(":memory:"), seed=1).snapshot()

    with ThreadPoolExecutor(1) as pool:  # callers may already run an event loop
        return pool.submit(asyncio.run, build()).result()


def still_status() -> HostedStatus:
    """The demo worker in the middle of its work, at NOW."""
    base = _registered()
    calls_by_name: dict[str, list[CallSnapshot]] = {}
    for call in CALLS:
        calls_by_name.setdefault(call.name, []).append(call)
    names = tuple(
        replace(
            n,
            calls_in_flight=len(calls_by_name.get(n.name, [])),
            tasks_in_flight=sum(len(c.task_ids) for c in calls_by_name.get(n.name, [])),
            offered=POLL[n.name][0],
            claimed=POLL[n.name][1],
            shortfall=POLL[n.name][2],
        )
        for n in base.names
    )
    resources = []
    for res in base.resources:
        holders = tuple(
            ResourceHolder(c.call_id, c.name, c.task_ids, c.started_at_ms)
            for c in CALLS
            if any(n.name == c.name and n.resource == res.name for n in base.names)
        )
        resources.append(replace(res, held=len(holders), holders=holders))
    snapshot = replace(
        base,
        worker_id="worker_01KDSTILL0000000000000000",
        state="running",
        concurrency_used=len(CALLS),
        concurrency_limit=16,
        polls=1_204,
        last_poll_at_ms=NOW - 80,
        tasks_claimed=5_310,
        names=names,
        resources=tuple(resources),
        calls=CALLS,
        recent_errors=ON_ERROR,
        recent_failures=REPORTS,
    )
    return HostedStatus(SPEC, "running", None, snapshot, loop_lag_ms=2, loads=1)


class StillHost:
    """Stands where a ``WorkerHost`` would: the same statuses every time, no threads."""

    def __init__(self) -> None:
        self.status = still_status()
        self.workers = (self,)
        self.spec = SPEC

    def __bool__(self) -> bool:
        return True

    async def statuses(self) -> list[HostedStatus]:
        return [self.status]

    def on_change(self, listener: Any) -> Any:
        return lambda: None  # a still worker never changes


def backlog_rows() -> list[dict[str, Any]]:
    """Queued tasks of the demo's names, ``BACKLOG`` of each, due a few seconds ago."""
    rows = []
    for offset, (name, count) in enumerate(sorted(BACKLOG.items())):
        for i in range(count):
            n = 500 + offset * 100 + i
            rows.append(task_row(n, 0.1 + i / 100, name=name, queue="media"))
    return rows


def hosted_app(path: Path) -> ConsoleApp:
    """The console on the demo database (plus the demo names' backlog), a still demo
    worker hosted, clock frozen. ``path`` must hold the demo database already."""
    insert(path, backlog_rows(), {})
    store = SQLiteStore(path)
    target = Target(str(path), "sqlite", "demo.db")
    return ConsoleApp(
        store,
        Settings(target=target, refresh_s=3600.0),
        clock=FixedClock(NOW),
        measure=lambda: 0.0,
        host=StillHost(),  # type: ignore[arg-type]
        wait_registry=lambda: list(WAITS),
    )


#: Hosted view -> keys that show it (after the console settles).
HOSTED_VIEWS: dict[str, tuple[str, ...]] = {
    "waits": ("5",),
    "quotas": ("6",),
    "resources": ("7",),
    "calls": ("8",),
    "errors": ("9",),
    "traceback": ("9", "enter"),
}
