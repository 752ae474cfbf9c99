"""The Resources view: per declared resource, capacity, units held and by which calls,
and the names waiting on it with their queued counts.

At capacity 1 a resource is a lock, and this is the lock view: one holder, the
waiters under it.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult

from cairnq_tui.formatting import duration, safe_text
from cairnq_tui.widgets.hosted_view import HostedView
from cairnq_tui.widgets.keyed_table import KeyedTable

COLUMNS = [
    ("Resource / call", "what"),
    ("Held", "held"),
    ("Name", "name"),
    ("Tasks", "tasks"),
    ("For", "elapsed"),
]


class ResourcesView(HostedView):
    """A header row per resource, then its holders, then the names waiting on it."""

    wants_backlog = True

    def compose_body(self) -> ComposeResult:
        yield KeyedTable(COLUMNS, id="resources-table")

    def draw(self) -> None:
        now = self.now()
        rows = []
        for status in self.statuses:
            snap = status.snapshot
            if snap is None:
                continue
            for res in snap.resources:
                base = f"{status.spec}/{res.name}"
                lock = " (lock)" if res.capacity == 1 else ""
                full = res.held >= res.capacity
                rows.append(
                    (
                        base,
                        [
                            Text.assemble((res.name, "bold reverse"), lock),
                            Text(f"{res.held}/{res.capacity}", style="bold red" if full else ""),
                            Text(f"capacity {res.capacity}", style="dim"),
                            Text(""),
                            Text(""),
                        ],
                    )
                )
                holding = set()
                for holder in res.holders:
                    holding.add(holder.name)
                    more = f" +{len(holder.task_ids) - 1}" if len(holder.task_ids) > 1 else ""
                    rows.append(
                        (
                            f"{base}/call/{holder.call_id}",
                            [
                                Text(f"  holds: call {holder.call_id}", style="green"),
                                Text("1"),
                                safe_text(holder.name, limit=40),
                                Text(holder.task_ids[0] + more if holder.task_ids else "—"),
                                Text(duration(max(0, now - holder.started_at_ms))),
                            ],
                        )
                    )
                for name in snap.names:
                    if name.resource != res.name:
                        continue
                    backlog = self.backlog.get(name.name)
                    if backlog is None or backlog.value == 0:
                        continue
                    rows.append(
                        (
                            f"{base}/wait/{name.name}",
                            [
                                Text("  queued for it", style="yellow" if full else "dim"),
                                Text(""),
                                safe_text(name.name, limit=40),
                                Text(f"{backlog} queued"),
                                Text(""),
                            ],
                        )
                    )
        self.query_one("#resources-table", KeyedTable).sync(rows)
