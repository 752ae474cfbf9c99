"""The Metrics view (ctrl+p "Metrics"): throughput, latency and queue depth over time.

Per queue (all names) and per queue and name, over 1 h, 6 h or 24 h (``w``
cycles), from the retained rows (``Inspector.metrics``): completions and
failures per minute and due-to-done latency p50 / p95 / p99
(``completed_at_ms - run_at_ms``). Two charts (textual-plotext): the
highlighted row's completions and failures per minute across the window, and
queue depth (queued tasks) over the same window as the recorder sampled it into
the history file (none without one, or before it sampled): every queue's on a
queue's row, the name's in its queue on a name's row.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Static
from textual_plotext import PlotextPlot

from cairnq_tui import keymap
from cairnq_tui.formatting import duration, safe_text
from cairnq_tui.messages import DataMessage
from cairnq_tui.widgets.keyed_table import ColumnSpec, KeyedTable
from cairnq_tui.widgets.view_bases import DataView
from engine.inspection import WINDOWS, Metrics, MetricSeries

WINDOW_ORDER = ("1h", "6h", "24h")
BUCKETS = 60
COLUMNS: list[ColumnSpec] = [
    ("Queue", "queue"),
    ("Name", "name"),
    ("Done", "done"),
    ("Failed", "failed"),
    ("Done/min", "rate"),
    ("Failed/min", "frate"),
    ("p50", "p50"),
    ("p95", "p95"),
    ("p99", "p99"),
]


Depth = dict[str, list[tuple[int, int]]]
#: Whose depth the chart shows: (None, None) every queue's, or (queue, name).
Scope = tuple[str | None, str | None]


@dataclass
class MetricsRefreshed(DataMessage):
    metrics: Metrics
    depth: Depth | None  # None: no history file
    window: str
    scope: Scope


def _row_key(series: MetricSeries) -> str:
    return f"{series.queue}\x00{series.name}"


def _ms(value: int | None) -> Text:
    return Text("—", style="dim") if value is None else Text(duration(value))


class MetricsView(DataView):
    """Rates and latency per queue and name, and two charts."""

    BINDINGS = keymap.METRICS

    def __init__(self, window: str = "1h", **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.window = window
        self.metrics: Metrics | None = None
        self.depth: Depth | None = None
        self.depth_scope: Scope = (None, None)
        self.rows: dict[str, MetricSeries] = {}
        self._charted: str | None = None

    def compose(self) -> ComposeResult:
        yield Static("", id="metrics-window")
        yield KeyedTable(COLUMNS, id="metrics-table")
        with Horizontal(id="metrics-charts"):
            yield PlotextPlot(id="rate-chart")
            yield PlotextPlot(id="depth-chart")
        yield Static("", id="metrics-info")

    @property
    def table(self) -> KeyedTable:
        return self.query_one("#metrics-table", KeyedTable)

    def on_mount(self) -> None:
        self._draw_window()

    async def read(self) -> MetricsRefreshed:
        window = self.window
        span = WINDOWS[window] or 3_600_000
        metrics = await self.console.inspector.metrics(window_ms=span, buckets=BUCKETS)
        scope = self._depth_scope()
        depth = await self._read_depth(metrics.since_ms, scope)
        return MetricsRefreshed(0.0, metrics, depth, window, scope)

    async def _read_depth(self, since_ms: int, scope: Scope) -> Depth | None:
        history = self.console.history
        if history is None:
            return None
        queue, name = scope
        return await asyncio.to_thread(history.file.depth, since_ms, queue=queue, name=name)

    def _depth_scope(self) -> Scope:
        chosen = self._chosen() if self.is_mounted else None
        if chosen is None or chosen.name == "*":
            return (None, None)
        return (chosen.queue, chosen.name)

    def on_metrics_refreshed(self, message: MetricsRefreshed) -> None:
        stale = message.window != self.window
        if not stale:
            self.metrics, self.depth = message.metrics, message.depth
            self.depth_scope = message.scope
        self.drawn(message, draw=not stale)

    async def _rescope_depth(self) -> None:
        """The highlighted row changed whose depth to chart: read it (the file only)."""
        metrics, scope = self.metrics, self._depth_scope()
        if metrics is None or scope == self.depth_scope:
            return
        depth = await self._read_depth(metrics.since_ms, scope)
        if scope == self._depth_scope() and metrics is self.metrics:
            self.depth, self.depth_scope = depth, scope
            self._draw_depth_chart()

    def draw(self) -> None:
        self._draw_window()
        metrics = self.metrics
        if metrics is None:
            return
        minutes = (metrics.until_ms - metrics.since_ms) / 60_000
        series = [*metrics.by_queue(), *metrics.series]
        series.sort(key=lambda s: (s.queue, s.name != "*", s.name))
        self.rows = {_row_key(s): s for s in series}
        table_rows = []
        for s in series:
            done, failed = sum(s.succeeded), sum(s.failed)
            whole = s.name == "*"
            table_rows.append(
                (
                    _row_key(s),
                    [
                        safe_text(s.queue, "bold" if whole else "", limit=24),
                        Text("(all names)", style="dim") if whole else safe_text(s.name, limit=32),
                        Text(f"{done:,}"),
                        Text(f"{failed:,}", style="bold red" if failed else ""),
                        Text(f"{done / minutes:.2f}"),
                        Text(f"{failed / minutes:.2f}"),
                        _ms(s.latency.p50_ms),
                        _ms(s.latency.p95_ms),
                        _ms(s.latency.p99_ms),
                    ],
                )
            )
        self.table.sync(table_rows)
        self._draw_rate_chart()
        self._draw_depth_chart()
        capped = f" (the newest {metrics.cap:,} only)" if metrics.capped else ""
        depth = (
            "queue depth: no history file (--no-history)"
            if self.depth is None
            else f"queue depth: {sum(len(v) for v in self.depth.values())} sample(s) recorded"
        )
        self.query_one("#metrics-info", Static).update(
            Text(
                f"{metrics.completions_read:,} finished task(s) read{capped} · latency is "
                f"due to done · {depth}",
                style="dim",
            )
        )

    def _chosen(self) -> MetricSeries | None:
        key = self.table.cursor_key
        return self.rows.get(key) if key is not None else None

    def _draw_rate_chart(self) -> None:
        metrics = self.metrics
        if metrics is None:
            return
        chosen = self._chosen()
        plot = self.query_one("#rate-chart", PlotextPlot)
        plt = plot.plt
        plt.clear_figure()
        if chosen is not None:
            xs = [
                (metrics.bucket_start_ms + i * metrics.bucket_ms - metrics.until_ms) / 60_000
                for i in range(len(chosen.succeeded))
            ]
            plt.plot(xs, list(chosen.per_minute(chosen.succeeded, metrics.bucket_ms)), label="done")
            plt.plot(xs, list(chosen.per_minute(chosen.failed, metrics.bucket_ms)), label="failed")
            name = "all names" if chosen.name == "*" else chosen.name
            plt.title(f"{chosen.queue} · {name}: per minute")
        else:
            plt.title("per minute")
        plt.xlabel("minutes ago")
        self._charted = self.table.cursor_key
        plot.refresh()

    def _draw_depth_chart(self) -> None:
        metrics = self.metrics
        plot = self.query_one("#depth-chart", PlotextPlot)
        plt = plot.plt
        plt.clear_figure()
        queue, name = self.depth_scope
        if name is None:
            plt.title("queued tasks (recorder)")
        elif self.depth:
            plt.title(f"queued {name[:24]} in {(queue or '')[:16]} (recorder)")
        else:  # (past the names sampled one by one, a name counts as "other")
            plt.title(f"no samples of {name[:24]} in {(queue or '')[:16]}")
        plt.xlabel("minutes ago")
        if metrics is not None:
            plt.xlim(-(metrics.until_ms - metrics.since_ms) / 60_000, 0)
        if metrics is not None and self.depth:
            for queue, points in sorted(self.depth.items()):
                xs = [(at - metrics.until_ms) / 60_000 for at, _ in points]
                plt.plot(xs, [n for _, n in points], label=queue[:20])
        plot.refresh()

    def on_keyed_table_row_highlighted(self, event: KeyedTable.RowHighlighted) -> None:
        event.stop()
        if self.table.cursor_key != self._charted:
            self._draw_rate_chart()
        if self._depth_scope() != self.depth_scope and self.console.history is not None:
            self.run_worker(self._rescope_depth(), group="metrics-depth", exclusive=True)

    def _draw_window(self) -> None:
        labels = Text("Window: ", style="bold")
        for label in WINDOW_ORDER:
            labels.append(f" {label} ", style="reverse bold" if label == self.window else "dim")
            labels.append(" ")
        labels.append("  (w changes it; the charts follow the highlighted row)", style="dim")
        self.query_one("#metrics-window", Static).update(labels)

    def action_next_window(self) -> None:
        self.window = WINDOW_ORDER[(WINDOW_ORDER.index(self.window) + 1) % len(WINDOW_ORDER)]
        self._draw_window()
        self.console.refresh_now(force=True)
