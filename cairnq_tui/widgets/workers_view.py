"""The Workers view (ctrl+p "Workers"): worker ids as the database sees them.

Every worker id holding a lease now, from the running rows
(``Inspector.workers``): tasks held, names, queues, the shortest lease left; a
worker whose leases all expired unrenewed is flagged as stopped heartbeating,
with the tasks waiting for lease recovery. Below them, the workers the
recorder saw before (the history file) that hold nothing now: when last seen and
what they held then.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import Static

from cairnq_tui.formatting import age, lease_left, safe_text
from cairnq_tui.history import SeenWorker
from cairnq_tui.messages import DataMessage
from cairnq_tui.widgets.keyed_table import ColumnSpec, KeyedTable
from cairnq_tui.widgets.view_bases import DataView
from engine.inspection import WorkerLeases

COLUMNS: list[ColumnSpec] = [
    ("Worker", "worker"),
    ("State", "state"),
    ("Tasks", "tasks"),
    ("Names", "names"),
    ("Queues", "queues"),
    ("Shortest lease left", "lease"),
    ("Last seen", "seen"),
    ("Waiting for recovery", "expired"),
]


@dataclass
class WorkersRefreshed(DataMessage):
    now: list[WorkerLeases]
    seen: list[SeenWorker] | None  # None: no history file


def _joined(values: tuple[str, ...], limit: int = 40) -> Text:
    return safe_text(", ".join(values), limit=limit)


class WorkersView(DataView):
    """Workers holding leases now, then workers seen before."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.now: list[WorkerLeases] = []
        self.seen: list[SeenWorker] | None = None

    def compose(self) -> ComposeResult:
        yield KeyedTable(COLUMNS, id="workers-table")
        yield Static("", id="workers-info")

    @property
    def table(self) -> KeyedTable:
        return self.query_one("#workers-table", KeyedTable)

    async def read(self) -> WorkersRefreshed:
        now = await self.console.inspector.workers()
        history = self.console.history
        seen = None
        if history is not None:
            seen = await asyncio.to_thread(history.file.workers_seen)
        return WorkersRefreshed(0.0, now, seen)

    def on_workers_refreshed(self, message: WorkersRefreshed) -> None:
        self.now, self.seen = message.now, message.seen
        self.drawn(message)

    def draw(self) -> None:
        now_ms = self.console.clock()
        rows = []
        holding = set()
        for w in self.now:
            name = w.worker_id if w.worker_id is not None else "(no worker id)"
            holding.add(w.worker_id)
            stopped = w.stopped_heartbeating
            expired = Text("")
            if w.expired_task_ids:
                first = w.expired_task_ids[0]
                more = f" +{len(w.expired_task_ids) - 1}" if len(w.expired_task_ids) > 1 else ""
                expired = Text(f"{len(w.expired_task_ids)}: {first}{more}", style="yellow")
            rows.append(
                (
                    f"now:{name}",
                    [
                        safe_text(name, "bold", limit=32),
                        Text("STOPPED HEARTBEATING", style="bold red")
                        if stopped
                        else Text("holding leases", style="green"),
                        Text(str(w.tasks)),
                        _joined(w.names),
                        _joined(w.queues, 24),
                        lease_left(now_ms + w.shortest_lease_left_ms, now_ms),
                        Text("now"),
                        expired,
                    ],
                )
            )
        for s in self.seen or []:
            if s.worker_id in holding:
                continue
            rows.append(
                (
                    f"seen:{s.worker_id}",
                    [
                        safe_text(s.worker_id, limit=32),
                        Text("seen before", style="dim"),
                        Text(f"({s.tasks})", style="dim"),
                        _joined(s.names),
                        _joined(s.queues, 24),
                        Text("—", style="dim"),
                        Text(f"{age(s.last_seen_ms, now_ms)} ago"),
                        Text(""),
                    ],
                )
            )
        self.table.sync(rows)
        stopped_count = sum(1 for w in self.now if w.stopped_heartbeating)
        before = (
            "no history file (--no-history): workers seen before are not known"
            if self.seen is None
            else f"{len(rows) - len(self.now)} seen before (the recorder, 7 days)"
        )
        self.query_one("#workers-info", Static).update(
            Text(
                f"{len(self.now)} holding leases now ({stopped_count} stopped heartbeating)"
                f" · {before}",
                style="dim",
            )
        )
