"""The Keys view: the key table by prefix, and following a key live.

Following runs ``CairnQ.wait_by_key`` (which re-resolves the key on every beat,
so it moves on when a ``replace`` moves the key) and shows the wait as the
engine's wait registry sees it: elapsed time, the task the key points at now,
and each move, until that task is terminal.
"""

from __future__ import annotations

import asyncio
import time

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.widgets import Input, Static

from cairnq_tui import keymap
from cairnq_tui.formatting import age, duration, quoted, safe_text, status_text
from cairnq_tui.messages import FollowUpdated, KeysRefreshed
from cairnq_tui.widgets.keyed_table import KeyedTable
from cairnq_tui.widgets.task_rows import OpensTaskRows
from cairnq_tui.widgets.view_bases import DataView
from engine import TaskRef, TaskTimeout, active_waits
from engine.inspection import KeyPage

PAGE_SIZE = 50
FOLLOW_TIMEOUT_MS = 24 * 3_600_000
COLUMNS = [
    ("Key", "key"),
    ("Task", "task"),
    ("Status", "status"),
    ("Name", "name"),
    ("Queue", "queue"),
    ("Moved", "moved"),
]


class KeysView(OpensTaskRows, DataView):
    """Prefix search over keys, paging, and a follow panel."""

    BINDINGS = keymap.KEYS

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.prefix: str | None = None
        self.after: str | None = None
        self.before: str | None = None
        self.page: KeyPage | None = None
        self.generation = 0
        self.following: str | None = None
        self.follow_started = 0.0
        self.follow_history: list[str] = []
        self.follow_task: str | None = None
        self.follow_done: str | None = None
        self.follow_status: str | None = None
        #: When the follow ended (monotonic); its elapsed time stops there.
        self.follow_ended: float | None = None
        #: After the follow ended: the key's task as the last refresh found it.
        self.followed_now: TaskRef | None = None

    def compose(self) -> ComposeResult:
        yield Input(placeholder="key prefix…", id="key-search")
        yield KeyedTable(COLUMNS, id="keys-table")
        yield Static("", id="keys-info")
        yield Static("", id="follow-panel")

    @property
    def table(self) -> KeyedTable:
        return self.query_one("#keys-table", KeyedTable)

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self.prefix = event.value or None
        self.after = self.before = None
        self.console.refresh_now(force=True)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.table.focus()

    def refresh_data(self) -> None:
        self.generation += 1
        generation, prefix, after, before = self.generation, self.prefix, self.after, self.before
        self.start_read(lambda: self.read_page(generation, prefix, after, before))

    async def read_page(
        self, generation: int, prefix: str | None, after: str | None, before: str | None
    ) -> KeysRefreshed:
        page = await self.console.inspector.keys_page(
            prefix, after=after, before=before, limit=PAGE_SIZE
        )
        followed = None
        if self.following is not None and self.follow_done is not None:
            # The follow ended; the panel keeps showing where its key points now.
            followed = await self.console.client.get_status_by_key(self.following)
        return KeysRefreshed(0.0, generation, page, followed)

    def on_keys_refreshed(self, message: KeysRefreshed) -> None:
        fresh = message.generation == self.generation
        if fresh:
            self.page = message.page
            if not message.page.has_previous:
                self.after = self.before = None
            self.followed_now = message.followed
        self.drawn(message, draw=fresh)

    def draw(self) -> None:
        page = self.page
        if page is None:
            return
        now = self.console.clock()
        allowed = set(self.console.settings.queues)
        rows = [
            (
                k.key,
                [
                    safe_text(k.key, "bold", limit=48),
                    Text(k.task_id, style="dim"),
                    status_text(k.status),
                    safe_text(k.name or "", limit=32),
                    safe_text(k.queue or "", limit=24),
                    Text(age(k.updated_at_ms, now)),
                ],
            )
            for k in page.rows
            if not allowed or k.queue in allowed
        ]
        self.table.sync(rows)
        nav = [x for x, ok in (("[ previous", page.has_previous), ("] next", page.has_next)) if ok]
        info = f"{len(rows)} key(s)" + (
            f" starting with {quoted(self.prefix)}" if self.prefix else ""
        )
        info_line = Text("  ·  ".join([info, *nav]), style="dim")
        self.query_one("#keys-info", Static).update(info_line, layout=False)
        self.draw_follow()

    # -- follow ------------------------------------------------------------------------------------

    def action_follow(self) -> None:
        key = self.table.cursor_key
        if key is None:
            return
        self.following = key
        self.follow_started = time.monotonic()
        self.follow_history = []
        self.follow_task = None
        self.follow_done = None
        self.follow_status = None
        self.follow_ended = None
        self.followed_now = None
        self.follow(key)
        self.draw_follow()

    def action_stop_follow(self) -> None:
        if self.following is not None:
            self.workers.cancel_group(self, "follow")
            self.following = None
            self.draw_follow()

    @work(exclusive=True, group="follow", exit_on_error=False)
    async def follow(self, key: str) -> None:
        waiter = asyncio.ensure_future(
            self.console.client.wait_by_key(
                key, timeout_ms=FOLLOW_TIMEOUT_MS, poll_ms=200, max_poll_ms=1_000
            )
        )
        try:
            while not waiter.done():
                snapshot = next(
                    (w for w in active_waits() if w.kind == "wait_by_key" and w.key == key), None
                )
                if snapshot is not None:
                    self.post_message(FollowUpdated(key, snapshot=snapshot))
                await asyncio.wait({waiter}, timeout=0.25)
            try:
                task = waiter.result()
                self.post_message(FollowUpdated(key, finished=task.status, task_id=task.id))
            except TaskTimeout:
                self.post_message(FollowUpdated(key, finished="timed out"))
        finally:
            waiter.cancel()

    def on_follow_updated(self, message: FollowUpdated) -> None:
        message.stop()
        if message.key != self.following:
            return
        snap = message.snapshot
        current = message.task_id or (snap.task_id if snap else None)
        if current is not None and current != self.follow_task:
            stamp = duration(int((time.monotonic() - self.follow_started) * 1000))
            verb = "resolved to" if self.follow_task is None else "moved to (replace)"
            self.follow_history.append(f"+{stamp}  {verb} {current}")
            self.follow_task = current
        if snap is not None:
            self.follow_status = snap.last_status
        if message.finished is not None and self.follow_done is None:
            self.follow_done = message.finished
            self.follow_ended = time.monotonic()
        self.draw_follow()

    def draw_follow(self) -> None:
        panel = self.query_one("#follow-panel", Static)
        if self.following is None:
            panel.update(
                Text("w follows the highlighted key until its task is terminal.", style="dim")
            )
            return
        end = self.follow_ended if self.follow_ended is not None else time.monotonic()
        elapsed = duration(int((end - self.follow_started) * 1000))
        if self.follow_done is None:
            head = Text.assemble(
                ("Following ", "bold"),
                safe_text(self.following, "bold cyan"),
                f"  elapsed {elapsed}  now ",
                Text(self.follow_task or "(key points nowhere yet)"),
                " ",
                status_text(self.follow_status),
            )
        else:
            head = Text.assemble(
                ("Followed ", "bold"),
                safe_text(self.following, "bold cyan"),
                f" for {elapsed}  ",
                Text(self.follow_task or "—"),
                (f" — finished: {self.follow_done}", "bold"),
            )
            now = self.followed_now
            if now is not None:
                head.append("  · now ")
                head.append(now.id if now.id != self.follow_task else "")
                head.append(" " if now.id != self.follow_task else "")
                head.append_text(status_text(now.status))
        lines = [head, *[Text(line, style="dim") for line in self.follow_history[-6:]]]
        panel.update(Text("\n").join(lines))

    # -- actions ---------------------------------------------------------------------------------

    def _highlighted_task(self) -> str | None:
        key = self.table.cursor_key
        if self.page is None or key is None:
            return None
        return next((k.task_id for k in self.page.rows if k.key == key), None)

    def action_open_task(self) -> None:
        task_id = self._highlighted_task()
        if task_id is not None:
            self.console.open_task(task_id)

    def action_cancel_by_key(self) -> None:
        self.console.controls.cancel_by_key(self.table.cursor_key)

    def action_retry_by_key(self) -> None:
        self.console.controls.retry_by_key(self.table.cursor_key)

    def action_replace(self) -> None:
        task_id, key = self._highlighted_task(), self.table.cursor_key
        if task_id is not None and key is not None:
            self.console.controls.replace(task_id, key)

    def action_page_older(self) -> None:
        if self.page is not None and self.page.has_next and self.page.rows:
            self.after, self.before = self.page.rows[-1].key, None
            self.console.refresh_now(force=True)

    def action_page_newer(self) -> None:
        if self.page is not None and self.page.has_previous and self.page.rows:
            self.after, self.before = None, self.page.rows[0].key
            self.console.refresh_now(force=True)

    def action_focus_search(self) -> None:
        self.query_one("#key-search", Input).focus()
