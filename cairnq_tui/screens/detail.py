"""The task detail: every field, JSON as collapsible trees, lineage, and why it waits.

Opened on a task id, or on a key (after a replace): then every refresh resolves
the key anew, so the screen follows the key to the new task. The lease
countdown is redrawn every second from the clock between refreshes.

One detail screen is built per console and reused (``open_detail``): composing
it (four JSON trees in collapsibles) was most of the time between ``enter`` and
the screen on screen. Each open clears what the last one showed, draws a
"Loading" skeleton at once and fills it when the refresh worker's read comes
back; a read started for an earlier open is dropped.
"""

from __future__ import annotations

import asyncio
from typing import Any

from rich.table import Table
from rich.text import Text
from textual import events
from textual.app import App, ComposeResult
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Collapsible, Header, Static

from cairnq_tui import keymap
from cairnq_tui.formatting import (
    age,
    clean,
    lease_left,
    progress_bar,
    quoted,
    safe_text,
    status_text,
)
from cairnq_tui.history import SeenFailure
from cairnq_tui.hosting import HostedStatus
from cairnq_tui.messages import DetailRefreshed
from cairnq_tui.screens.reused import StyledOnce
from cairnq_tui.why import clock_time, hosted_reasons, why_not_running
from cairnq_tui.widgets.attempts import attempts_text
from cairnq_tui.widgets.json_tree import JsonTree
from cairnq_tui.widgets.key_footer import KeyFooter
from cairnq_tui.widgets.status_bar import StatusBar
from cairnq_tui.widgets.view_bases import DataNode
from engine import Task
from engine.inspection import TaskDetail

JSON_FIELDS = ("payload", "result", "error", "metadata")
#: The name the one detail screen is installed under.
DETAIL_SCREEN = "task-detail"


def _when(ms: int | None, now: int) -> Text:
    if ms is None:
        return Text("—", style="dim")
    return Text(f"{clock_time(ms)}  ({age(ms, now)}{' ago' if ms <= now else ''})")


class TaskDetailScreen(StyledOnce, DataNode, Screen[None]):
    """Live detail of one task (or of whatever a key points at)."""

    BINDINGS = keymap.DETAIL

    def __init__(self, task_id: str | None, *, follow_key: str | None = None) -> None:
        super().__init__()
        self.task_id = task_id
        self.follow_key = follow_key
        self.detail: TaskDetail | None = None
        self.missing = False
        self.hosted: list[HostedStatus] = []  # what hosted workers say (--worker)
        self.seen: list[SeenFailure] = []  # failed attempts the recorder saw
        #: Counts the tasks shown: a read started for an earlier one is dropped.
        self.opened = 0
        self._ticker: Timer | None = None

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        with VerticalScroll(id="detail"):
            yield Static("", id="detail-title")
            yield Static("", id="why")
            yield Static("", id="fields")
            yield Static("", id="lineage")
            yield Static("", id="attempts")
            for name in JSON_FIELDS:
                with Collapsible(title=name, collapsed=name == "metadata", id=f"c-{name}"):
                    yield JsonTree(name, id=f"json-{name}")
        yield StatusBar()
        yield KeyFooter()

    def on_mount(self) -> None:
        self._ticker = self.set_interval(1.0, self.draw)
        self.draw()

    def on_screen_resume(self, event: events.ScreenResume) -> None:
        # (``event`` is for StyledOnce's handler, which Textual calls after this one.)
        console = self.console
        bar = self.query_one(StatusBar)
        main_bar = console.status_bar()
        if main_bar is not None:
            bar.target, bar.dialect, bar.versions = (
                main_bar.target,
                main_bar.dialect,
                main_bar.versions,
            )
        bar.read_only = console.read_only
        if self._ticker is not None:
            self._ticker.resume()

    def on_screen_suspend(self) -> None:
        if self._ticker is not None:
            self._ticker.pause()  # nothing to count down while another screen is shown

    def _hosted_reasons(self, task: Task) -> list[str]:
        return [clean(r) for r in hosted_reasons(task.name, task.queue, task.status, self.hosted)]

    def show_task(self, task_id: str | None, *, follow_key: str | None = None) -> None:
        """Show another task (or key): nothing of the last one stays on screen."""
        self.task_id, self.follow_key = task_id, follow_key
        self.detail = None
        self.missing = False
        self.hosted = []
        self.seen = []
        self.opened += 1
        if not self.is_mounted:
            return  # composed empty
        for part in ("#why", "#fields", "#lineage", "#attempts"):
            self.query_one(part, Static).update("")
        for name in JSON_FIELDS:
            self.query_one(f"#json-{name}", JsonTree).blank()
            self.query_one(f"#c-{name}", Collapsible).collapsed = name == "metadata"
        self.query_one("#detail", VerticalScroll).scroll_home(animate=False)
        self.draw()

    # -- refresh ------------------------------------------------------------------------------

    def refresh_data(self) -> None:
        task_id, follow_key, opened = self.task_id, self.follow_key, self.opened
        self.start_read(lambda: self.read_task(task_id, follow_key, opened))

    async def read_task(
        self, task_id: str | None, follow_key: str | None, opened: int = 0
    ) -> DetailRefreshed:
        console = self.console
        if follow_key is not None:
            task = await console.client.get_by_key(follow_key)
            task_id = task.id if task is not None else task_id
        detail = await console.inspector.task_detail(task_id) if task_id else None
        hosted = await console.host.statuses() if console.host else []
        seen: list[SeenFailure] = []
        if console.history is not None and detail is not None:
            seen = await asyncio.to_thread(console.history.file.attempts, detail.task.id)
        if opened == self.opened:  # (else another task is shown now)
            self.hosted, self.seen = hosted, seen
        return DetailRefreshed(0.0, detail, opened)

    def on_detail_refreshed(self, message: DetailRefreshed) -> None:
        if message.opened != self.opened:
            self.drawn(message, draw=False)  # read for a task no longer shown
            return
        self.missing = message.detail is None
        if message.detail is not None:
            self.detail = message.detail
            self.task_id = message.detail.task.id
        bar = self.query_one(StatusBar)
        bar.cost_ms = message.cost_ms
        bar.state = self.console.refresh_state()
        self.drawn(message)

    def draw(self) -> None:
        now = self.console.clock()
        title = self.query_one("#detail-title", Static)
        if self.detail is None:
            what = f"key {quoted(self.follow_key)}" if self.follow_key else clean(self.task_id)
            title.update(
                Text(f"{'Not found: ' if self.missing else 'Loading '}{what}", style="bold")
            )
            return
        d = self.detail
        t = d.task
        title.update(
            Text.assemble(
                (t.id, "bold"),
                "  ",
                safe_text(t.name, "bold cyan"),
                "  ",
                status_text(t.status),
                (
                    f"  following key {quoted(self.follow_key)}" if self.follow_key else "",
                    "italic",
                ),
            )
        )
        why = why_not_running(t, now)
        if t.run_at_ms <= now:  # only a due task waits on a worker
            why = " ".join([why, *(f"{r[0].upper()}{r[1:]}." for r in self._hosted_reasons(t))])
        self.query_one("#why", Static).update(Text.assemble(("Why: ", "bold"), Text(why)))
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="bold", no_wrap=True)
        grid.add_column()
        grid.add_column(style="bold", no_wrap=True)
        grid.add_column()
        pairs: list[tuple[str, Text]] = [
            ("queue", safe_text(t.queue)),
            ("status", status_text(t.status)),
            ("attempt", Text(f"{t.attempt} of {t.max_attempts}")),
            ("priority", Text(str(t.priority))),
            ("worker", safe_text(t.worker_id or "—")),
            (
                "lease left",
                lease_left(t.lease_until_ms, now)
                if t.status == "running"
                else Text("—", style="dim"),
            ),
            ("progress", progress_bar(t.progress)),
            ("message", safe_text(t.message or "—")),
            ("created", _when(t.created_at_ms, now)),
            ("updated", _when(t.updated_at_ms, now)),
            ("run at", _when(t.run_at_ms, now)),
            ("completed", _when(t.completed_at_ms, now)),
            ("lease until", _when(t.lease_until_ms, now)),
            ("cancel requested", _when(t.cancel_requested_at_ms, now)),
            ("correlation", safe_text(t.correlation_id or "—")),
            ("key", safe_text(", ".join(d.keys) if d.keys else "—")),
        ]
        for i in range(0, len(pairs), 2):
            (a, va), (b, vb) = pairs[i], pairs[i + 1]
            grid.add_row(a, va, b, vb)
        self.query_one("#fields", Static).update(grid)
        lineage = Text()
        lineage.append("parent ", "bold")
        lineage.append(
            f"{d.parent.id} ({d.parent.status})" if d.parent else clean(t.parent_id or "—")
        )
        lineage.append("   root ", "bold")
        lineage.append(
            "itself"
            if t.root_id == t.id
            else f"{d.root.id} ({d.root.status})"
            if d.root
            else clean(t.root_id or "—")
        )
        lineage.append(f"   children ({len(d.children)}{'+' if d.children_capped else ''})", "bold")
        for child in d.children[:10]:
            lineage.append("\n  ")
            lineage.append_text(
                Text.assemble(
                    child.id, "  ", safe_text(child.name), "  ", status_text(child.status)
                )
            )
        self.query_one("#lineage", Static).update(lineage)
        self.query_one("#attempts", Static).update(attempts_text(t, self.hosted, self.seen, now))
        for name in JSON_FIELDS:
            self.query_one(f"#json-{name}", JsonTree).show(getattr(t, name))

    # -- actions ---------------------------------------------------------------------------------

    def action_back(self) -> None:
        self.app.pop_screen()

    def action_cancel(self) -> None:
        if self.detail is not None:
            self.console.controls.cancel_tasks([self.detail.task])

    def action_retry(self) -> None:
        if self.detail is not None:
            self.console.controls.retry_tasks([self.detail.task])

    def action_replace(self) -> None:
        if self.detail is None or not self.detail.keys:
            self.app.notify("Replace works on a task that a key points at.", severity="warning")
            return
        self.console.controls.replace(self.detail.task.id, self.detail.keys[0])


def open_detail(app: App[Any], task_id: str | None, follow_key: str | None = None) -> None:
    """Show ``task_id`` (or what ``follow_key`` points at) on the console's one detail screen.

    Built at the first open and installed, so it stays mounted when left: later
    opens only clear and refill it. Already in the stack (under a dialog), it
    comes back to the top rather than being stacked twice.
    """
    if not app.is_screen_installed(DETAIL_SCREEN):
        app.install_screen(TaskDetailScreen(task_id, follow_key=follow_key), DETAIL_SCREEN)
        app.push_screen(DETAIL_SCREEN)
        return
    screen = app.get_screen(DETAIL_SCREEN, TaskDetailScreen)
    screen.show_task(task_id, follow_key=follow_key)
    if screen in app.screen_stack:
        while app.screen is not screen:
            app.pop_screen()
    else:
        app.push_screen(screen)
