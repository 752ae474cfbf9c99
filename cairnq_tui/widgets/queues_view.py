"""The Queues view: per queue, counts per status, latency, throughput, headroom.

Counts may cost up to their cap, so they are read every few ticks and shown
capped ("10,000+"); latency and throughput are cheap index seeks and follow
every tick.
"""

from __future__ import annotations

from collections import defaultdict

from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import Static

from cairnq_tui import keymap
from cairnq_tui.formatting import STATUS_STYLES, age, duration, safe_text, sparkline
from cairnq_tui.messages import QueuesRefreshed
from cairnq_tui.widgets.keyed_table import KeyedTable
from cairnq_tui.widgets.view_bases import DataView
from engine import STATUSES
from engine.inspection import CappedCount

MINUTES = 15
#: Per queue and status: 20 queues x 5 statuses x 1,000 index entries stays a few
#: milliseconds on SQLite and tens on Postgres for a 1M-task table; at 10,000 the
#: same tick measured ~40 ms (SQLite) and ~200-900 ms (Postgres, 300k tasks).
QUEUE_COUNT_CAP = 1_000
COLUMNS = [
    ("Queue", "queue"),
    *[(s.capitalize(), s) for s in STATUSES],
    ("Headroom", "headroom"),
    ("Oldest due", "latency"),
    ("Next delayed", "delayed"),
    ("Done/min", "done"),
    ("Failed/min", "failed_rate"),
    (f"Last {MINUTES} min", "spark"),
]


class QueuesView(DataView):
    """One row per queue; enter opens the Tasks view filtered to it."""

    BINDINGS = keymap.QUEUES

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.counts: dict[str, dict[str, CappedCount]] = {}
        self.last: QueuesRefreshed | None = None

    def compose(self) -> ComposeResult:
        yield KeyedTable(COLUMNS, id="queues-table")
        yield Static("", id="queues-info")

    @property
    def table(self) -> KeyedTable:
        return self.query_one("#queues-table", KeyedTable)

    def refresh_data(self) -> None:
        console = self.console
        slow = not self.counts or console.ticks % console.settings.slow_every == 1
        self.start_read(lambda: self.read_queues(slow))

    async def read_queues(self, with_counts: bool) -> QueuesRefreshed:
        console = self.console
        inspector = console.inspector
        queues = await inspector.queues()
        counts = await inspector.queue_counts(cap=QUEUE_COUNT_CAP) if with_counts else None
        latency = await inspector.queue_latency()
        throughput = await inspector.throughput(minutes=MINUTES)
        recent = await inspector.recent_finished(window_ms=60_000)
        headroom: dict[str, int] = {}
        limits = console.settings.max_depth
        for queue in queues:
            limit = limits.get(queue, limits.get("*"))
            if limit is not None:
                headroom[queue] = await console.client.queue_depth(queue, limit)
        return QueuesRefreshed(0.0, queues, counts, latency, throughput, headroom, recent)

    def on_queues_refreshed(self, message: QueuesRefreshed) -> None:
        if message.counts is not None:
            self.counts = message.counts
        self.last = message
        self.console.known_queues = message.queues
        self.drawn(message)

    def draw(self) -> None:
        message = self.last
        if message is None:
            return
        now = self.console.clock()
        current_minute = now // 60_000
        per_minute: dict[tuple[str, str], dict[int, int]] = defaultdict(dict)
        for bucket in message.throughput:
            per_minute[(bucket.queue, bucket.status)][bucket.minute] = bucket.count
        allowed = set(self.console.settings.queues)
        rows = []
        for queue in message.queues:
            if allowed and queue not in allowed:
                continue
            counts = self.counts.get(queue, {})
            cells: list[Text] = [safe_text(queue, "bold")]
            for status in STATUSES:
                count = counts.get(status)
                style = STATUS_STYLES[status] if count and count.value else "dim"
                cells.append(Text(str(count) if count else "…", style=style))
            limit = message.headroom.get(queue)
            cells.append(
                Text(f"{limit:,}" if limit is not None else "—", style="" if limit else "dim")
            )
            lat = message.latency.get(queue)
            oldest = lat.oldest_due_ms if lat else None
            cells.append(
                Text(
                    age(oldest, now),
                    style="bold yellow" if oldest and now - oldest > 60_000 else "",
                )
                if oldest is not None
                else Text("—", style="dim")
            )
            nxt = lat.next_delayed_ms if lat else None
            cells.append(Text("in " + duration(nxt - now)) if nxt else Text("—", style="dim"))
            done = per_minute[(queue, "succeeded")]
            failed = per_minute[(queue, "failed")]
            # Rolling: what finished in the last 60 s, not in the last full minute.
            recent = message.recent.get(queue, {})
            done_60s, failed_60s = recent.get("succeeded", 0), recent.get("failed", 0)
            cells.append(Text(str(done_60s), style="green"))
            cells.append(Text(str(failed_60s), style="red" if failed_60s else "dim"))
            series = [
                done.get(m, 0) + failed.get(m, 0)
                for m in range(current_minute - MINUTES + 1, current_minute + 1)
            ]
            cells.append(sparkline(series))
            rows.append((queue, cells))
        self.table.sync(rows)
        info = (
            f"{len(rows)} queue(s) · counts capped at {QUEUE_COUNT_CAP:,}, "
            f"read every {self.console.settings.slow_every} refreshes"
        )
        self.query_one("#queues-info", Static).update(Text(info, style="dim"), layout=False)

    def on_keyed_table_row_selected(self, event: KeyedTable.RowSelected) -> None:
        event.stop()
        self.action_open_queue()

    def action_open_queue(self) -> None:
        queue = self.table.cursor_key
        if queue is not None:
            self.console.open_queue(queue)
