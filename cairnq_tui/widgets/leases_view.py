"""The Leases view: running tasks grouped by worker, with live lease countdowns.

An expired lease is shown as "awaiting recovery": the task is dead for its
worker already, and the next claim session (any worker's) requeues or fails it.
"""

from __future__ import annotations

from collections import defaultdict

from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import Static

from cairnq_tui import keymap
from cairnq_tui.formatting import lease_left, progress_bar, safe_text
from cairnq_tui.messages import LeasesRefreshed
from cairnq_tui.widgets.keyed_table import KeyedTable
from cairnq_tui.widgets.task_rows import OpensTaskRows
from cairnq_tui.widgets.view_bases import DataView
from engine.inspection import LeaseInfo

LIMIT = 500
COLUMNS = [
    ("Worker / task", "task"),
    ("Name", "name"),
    ("Queue", "queue"),
    ("Attempt", "attempt"),
    ("Lease left", "lease"),
    ("Cancel", "cancel"),
    ("Progress", "progress"),
    ("Message", "message"),
]
WORKER_PREFIX = "worker:"


class LeasesView(OpensTaskRows, DataView):
    """A header row per worker (counts), then its tasks."""

    BINDINGS = keymap.LEASES

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.leases: list[LeaseInfo] = []
        self.truncated = False

    def compose(self) -> ComposeResult:
        yield KeyedTable(COLUMNS, id="leases-table")
        yield Static("", id="leases-info")

    @property
    def table(self) -> KeyedTable:
        return self.query_one("#leases-table", KeyedTable)

    async def read(self) -> LeasesRefreshed:
        leases = await self.console.inspector.running(limit=LIMIT)
        return LeasesRefreshed(0.0, leases, LIMIT)

    def on_leases_refreshed(self, message: LeasesRefreshed) -> None:
        allowed = set(self.console.settings.queues)
        self.leases = [x for x in message.leases if not allowed or x.queue in allowed]
        self.truncated = len(message.leases) >= message.limit
        self.drawn(message)

    def draw(self) -> None:
        now = self.console.clock()
        by_worker: dict[str, list[LeaseInfo]] = defaultdict(list)
        for lease in self.leases:
            by_worker[lease.worker_id or "(no worker)"].append(lease)
        rows = []
        expired_total = 0
        for worker in sorted(by_worker):
            tasks = sorted(by_worker[worker], key=lambda x: x.id)
            expired = sum(1 for t in tasks if t.lease_until_ms <= now)
            canceling = sum(1 for t in tasks if t.cancel_requested_at_ms is not None)
            expired_total += expired
            summary = f"{len(tasks)} running"
            if expired:
                summary += f", {expired} awaiting recovery"
            if canceling:
                summary += f", {canceling} cancel requested"
            header = [safe_text(worker, "bold reverse"), Text(summary, style="bold")] + [
                Text("")
            ] * 6
            rows.append((WORKER_PREFIX + worker, header))
            for t in tasks:
                rows.append(
                    (
                        t.id,
                        [
                            Text("  " + t.id),
                            safe_text(t.name, limit=40),
                            safe_text(t.queue, limit=24),
                            Text(f"{t.attempt}/{t.max_attempts}"),
                            lease_left(t.lease_until_ms, now),
                            Text("requested", style="magenta")
                            if t.cancel_requested_at_ms is not None
                            else Text("—", style="dim"),
                            progress_bar(t.progress),
                            safe_text(t.message or "", limit=60),
                        ],
                    )
                )
        self.table.sync(rows)
        info = f"{len(self.leases)} running task(s) on {len(by_worker)} worker(s)"
        if expired_total:
            info += f" · {expired_total} lease(s) expired, awaiting recovery"
        if self.truncated:
            info += f" · showing the {LIMIT} soonest-expiring leases"
        self.query_one("#leases-info", Static).update(Text(info, style="dim"), layout=False)

    def highlighted(self) -> LeaseInfo | None:
        key = self.table.cursor_key
        return next((x for x in self.leases if x.id == key), None)

    def action_open_task(self) -> None:
        lease = self.highlighted()
        if lease is not None:
            self.console.open_task(lease.id)

    def action_cancel(self) -> None:
        lease = self.highlighted()
        if lease is None:
            return
        self.console.controls.cancel_tasks([lease])

    def action_cancel_worker(self) -> None:
        """``C``: cancel every running task of the worker under the cursor (its header
        row or one of its tasks)."""
        key = self.table.cursor_key
        if key is None:
            return
        if key.startswith(WORKER_PREFIX):
            worker = key[len(WORKER_PREFIX) :]
        else:
            lease = self.highlighted()
            if lease is None:
                return
            worker = lease.worker_id or "(no worker)"
        tasks = sorted(
            (x for x in self.leases if (x.worker_id or "(no worker)") == worker), key=lambda x: x.id
        )
        self.console.controls.cancel_tasks(tasks)
