"""The Tasks view: filters, a search, and one page of tasks diffed by id.

The page comes from ``Inspector.tasks_page`` (keyset paging in SQL); the table
holds that page only. The cursor stays on its task across refreshes, selected
tasks stay selected. The key column is filled by a second, separate read, only
for ids not seen yet: ``cairnq_task_keys`` has no index on the task id, so that
lookup reads the key table, and the page should not wait for it. The column has
a fixed width so that keys arriving late do not move the columns after it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.message import Message
from textual.suggester import SuggestFromList
from textual.widgets import Input, Select, Static

from cairnq_tui import keymap
from cairnq_tui.formatting import (
    age,
    due_in,
    progress_bar,
    quoted,
    safe_text,
    short_id,
    status_text,
)
from cairnq_tui.messages import TasksRefreshed
from cairnq_tui.widgets.keyed_table import ColumnSpec, KeyedTable
from cairnq_tui.widgets.task_ops import TaskOps
from cairnq_tui.widgets.task_rows import OpensTaskRows
from cairnq_tui.widgets.view_bases import DataView
from engine import STATUSES
from engine._inspect_types import order_time
from engine.inspection import CappedCount, Inspector, TaskFilter, TaskPage, TaskSummary

PAGE_SIZE = 50
#: The most task names one name filter matches (each is a page read and merged).
NAME_MATCHES = 20
#: The Key column has a fixed width: keys arrive after the page (a second read),
#: and a column that widened when they did would shift every column to its right.
KEY_WIDTH = 16
COLUMNS: list[ColumnSpec] = [
    ("", "sel"),
    ("ID", "id"),
    ("Name", "name"),
    ("Queue", "queue"),
    ("Status", "status"),
    ("Att", "attempt"),
    ("Pri", "priority"),
    ("Key", "key", KEY_WIDTH),
    ("Created", "created"),
    ("Updated", "updated"),
    ("Due", "due"),
    ("Worker", "worker"),
    ("Progress", "progress"),
    ("Message", "message"),
    ("Error", "error"),
]
SEARCH_KINDS = [
    ("id prefix", "id"),
    ("key prefix", "key"),
    ("payload text", "payload"),
    ("error text", "error"),
]
#: The Error column shows at most this much of the type and first message line.
ERROR_WIDTH = 60
#: Columns the operator may hide or move (``o``); the selection mark stays first.
CHOOSABLE = [spec[1] for spec in COLUMNS if spec[1] != "sel"]
_SPECS = {spec[1]: spec for spec in COLUMNS}


def parse_columns(text: str) -> list[str]:
    """``"id, name, status"`` -> the column keys in that order.

    Raises:
        ValueError: an unknown or repeated column, or none at all.
    """
    chosen = [part.strip().lower() for part in text.replace(" ", ",").split(",") if part.strip()]
    unknown = [c for c in chosen if c not in CHOOSABLE]
    if unknown:
        raise ValueError(
            f"unknown column(s) {', '.join(unknown)}; choose from {', '.join(CHOOSABLE)}"
        )
    if len(set(chosen)) != len(chosen):
        raise ValueError("a column is named twice")
    if not chosen:
        raise ValueError("name at least one column")
    return chosen


def error_cell(row: TaskSummary) -> Text:
    """The error type and the first line of its message (failed or retrying tasks)."""
    if row.error_type is None and row.error_message is None:
        return Text("")
    cell = Text()
    if row.error_type:
        cell.append_text(safe_text(row.error_type, "bold red", limit=24))
    if row.error_message:
        if row.error_type:
            cell.append(": ")
        cell.append_text(safe_text(row.error_message, limit=ERROR_WIDTH))
    return cell


def _merge_key(order: str) -> Callable[[TaskSummary], Any]:
    """How rows of several pages merge: by key, by id, or by the page's time then id."""
    if order == "key":
        return lambda r: r.key or ""
    if order == "id":
        return lambda r: r.id
    return lambda r: (order_time(r, order), r.id)  # type: ignore[arg-type]


_INDEX = {spec[1]: i for i, spec in enumerate(COLUMNS)}
_ALL = [spec[1] for spec in COLUMNS]


class TasksView(TaskOps, OpensTaskRows, DataView):
    """Filter bar, task table and a page line; refreshed by the app's loop."""

    BINDINGS = keymap.TASKS

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.filter = TaskFilter()
        self.cursor_before: str | None = None
        self.cursor_after: str | None = None
        self.page: TaskPage | None = None
        self.selected: set[str] = set()
        self.keys: dict[str, str | None] = {}
        #: True from the moment a key lookup is scheduled until its answer is drawn.
        self.keys_pending = False
        self.generation = 0
        self.queue_options: list[str] = []
        self.name_options: list[str] = []
        #: The first refresh generation drawn with the cursor on the top row (the
        #: first after a filter change); 0: none pending.
        self.cursor_top_from = 0
        #: The names the name filter matched on the last refresh.
        self.name_matches: list[str] = []

    def compose(self) -> ComposeResult:
        with Horizontal(id="task-filters"):
            yield Select([(s, s) for s in STATUSES], prompt="any status", id="status-filter")
            yield Select([], prompt="any queue", id="queue-filter")
            yield Input(placeholder="name contains", id="name-filter")
            yield Select(SEARCH_KINDS, value="id", allow_blank=False, id="search-kind")
            yield Input(placeholder="search…", id="search")
        yield self._new_table()
        yield Static("", id="tasks-info")

    @property
    def columns(self) -> list[str]:
        """The chosen columns, in order (kept by the app for the whole session)."""
        chosen = self.console.task_columns
        return ["sel", *(chosen if chosen else CHOOSABLE)]

    def _new_table(self) -> KeyedTable:
        return KeyedTable([_SPECS[c] for c in self.columns], id="tasks-table")

    def action_choose_columns(self) -> None:
        from cairnq_tui.screens.prompt import PromptScreen

        def chosen(text: str | None) -> None:
            if text is None:
                return
            try:
                columns = parse_columns(text)
            except ValueError as exc:
                self.app.notify(str(exc), severity="warning", markup=False)
                return
            self.console.task_columns = columns
            self.call_later(self._replace_table)

        current = ", ".join(self.columns[1:])
        self.app.push_screen(
            PromptScreen(
                "Columns: leave one out to hide it, move it to reorder "
                f"(all: {', '.join(CHOOSABLE)})",
                "id, name, status, …",
                current,
            ),
            chosen,
        )

    async def _replace_table(self) -> None:
        old = self.table
        await old.remove()
        table = self._new_table()
        await self.mount(table, before=self.query_one("#tasks-info"))
        table.focus()
        self.draw()

    @property
    def table(self) -> KeyedTable:
        return self.query_one("#tasks-table", KeyedTable)

    def on_mount(self) -> None:
        self.table.focus()

    def set_choices(self, queues: list[str], names: list[str]) -> None:
        """Offer the queues and names the database holds (and --queue allows)."""
        if names != self.name_options:
            self.name_options = list(names)
            self.query_one("#name-filter", Input).suggester = SuggestFromList(
                names, case_sensitive=True
            )
        allowed = list(self.console.settings.queues) or queues
        if allowed == self.queue_options:
            return
        select = self.query_one("#queue-filter", Select)
        current = select.value
        self.queue_options = list(allowed)
        # Setting the options must not read as a filter change (a refresh, cursor to top).
        with self.prevent(Select.Changed):
            select.set_options([(q, q) for q in allowed])
            if isinstance(current, str) and current in allowed:
                select.value = current

    # -- filters ---------------------------------------------------------------------------

    def _apply_filter(self) -> None:
        status = self.query_one("#status-filter", Select).value
        queue = self.query_one("#queue-filter", Select).value
        kind = self.query_one("#search-kind", Select).value
        self.filter = self.with_order(
            TaskFilter(
                status=status if isinstance(status, str) else None,
                queue=queue if isinstance(queue, str) else None,
                name=self.query_one("#name-filter", Input).value.strip() or None,
                search=self.query_one("#search", Input).value.strip() or None,
                search_kind=kind if isinstance(kind, str) else "id",  # type: ignore[arg-type]
            )
        )
        self.cursor_before = self.cursor_after = None
        self.cursor_top_from = self.generation + 1  # the next refresh reads the new filter
        self.console.refresh_now(force=True)

    def on_select_changed(self, event: Select.Changed) -> None:
        event.stop()
        self._apply_filter()

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self._apply_filter()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.table.focus()

    # -- refresh -------------------------------------------------------------------------------

    def refresh_data(self) -> None:
        self.generation += 1
        generation, flt = self.generation, self.with_order(self.filter)
        before, after = self.cursor_before, self.cursor_after
        self.start_read(lambda: self.read_page(generation, flt, before, after))

    def _queues_to_merge(self, flt: TaskFilter) -> list[str]:
        # --queue with several queues and no queue chosen: one page per queue, merged.
        allowed = list(self.console.settings.queues)
        return allowed if flt.queue is None and allowed else []

    async def read_page(
        self, generation: int, flt: TaskFilter, before: str | None, after: str | None
    ) -> TasksRefreshed:
        inspector = self.console.inspector
        queues: list[str | None] = [*self._queues_to_merge(flt)] or [flt.queue]
        names: list[str | None] = [flt.name]
        if flt.name:
            # The name filter matches every name containing the text (at most
            # NAME_MATCHES of them, found in SQL); none found: nothing matches.
            found = await inspector.names_containing(flt.name, limit=NAME_MATCHES)
            self.name_matches = found
            names = list(found) or [flt.name]
        filters = [replace(flt, queue=q, name=n) for q in queues for n in names]
        if len(filters) > 1:
            page = await self._merged_page(inspector, filters, before, after)
        else:
            page = await inspector.tasks_page(
                filters[0], before=before, after=after, limit=PAGE_SIZE
            )
        return TasksRefreshed(0.0, generation, page)

    @dataclass
    class KeysFound(Message):
        """The keys of tasks shown on the page (None: no key points at the task)."""

        keys: dict[str, str | None]

    @work(exclusive=True, group="task-keys", exit_on_error=False)
    async def load_keys(self, task_ids: list[str]) -> None:
        found = await self.console.inspector.keys_for_tasks(task_ids)
        keys = {task_id: next(iter(found.get(task_id, ())), None) for task_id in task_ids}
        self.post_message(self.KeysFound(keys))

    def on_tasks_view_keys_found(self, message: KeysFound) -> None:
        self.keys_pending = False
        if len(self.keys) > 5_000:
            self.keys.clear()
        self.keys.update(message.keys)
        self.draw()

    async def _merged_page(
        self,
        inspector: Inspector,
        filters: list[TaskFilter],
        before: str | None,
        after: str | None,
    ) -> TaskPage:
        # Several queues (--queue) or names (a name filter matching several): one
        # page each, merged into one page.
        pages = [
            await inspector.tasks_page(f, before=before, after=after, limit=PAGE_SIZE)
            for f in filters
        ]
        order = pages[0].order
        rows = sorted(
            (r for p in pages for r in p.rows),
            key=_merge_key(order),
            reverse=order == "failure" or (order != "key" and filters[0].descending),
        )[:PAGE_SIZE]
        counts = [p.total for p in pages if p.total is not None]
        total = (
            CappedCount(sum(c.value for c in counts), sum(c.cap for c in counts))
            if counts
            else None
        )
        return TaskPage(
            rows=tuple(rows),
            order=order,
            has_previous=any(p.has_previous for p in pages),
            has_next=any(p.has_next for p in pages),
            total=total,
            scan_limit=pages[0].scan_limit,
            window_note=pages[0].window_note,
        )

    def on_tasks_refreshed(self, message: TasksRefreshed) -> None:
        if message.generation == self.generation:
            self.page = message.page
            if (history := self.console.history) is not None:
                history.recorder.note_rows(message.page.rows)  # errors seen (retrying ones)
            if not message.page.has_previous:
                # At the top: follow new tasks as they arrive.
                self.cursor_before = self.cursor_after = None
            self.draw()
            if self.cursor_top_from and message.generation >= self.cursor_top_from:
                # A new filter: the cursor starts on the first row, not where it was.
                self.cursor_top_from = 0
                self.table.cursor_to(0)
            self.console.learn(
                {r.name for r in message.page.rows}, {r.queue for r in message.page.rows}
            )
            missing = [r.id for r in self.page.rows if r.key is None and r.id not in self.keys]
            if missing:
                # After the paint: on SQLite the key-table read runs on this thread.
                self.keys_pending = True
                self.call_after_refresh(self.load_keys, missing)
        self.drawn(message, draw=False)  # drawn above, unless a newer refresh made it stale

    def draw(self) -> None:
        page = self.page
        if page is None:
            return
        now = self.console.clock()
        columns = self.columns
        self.table.sync([(r.id, self._pick(self._cells(r, now), columns)) for r in page.rows])
        self._draw_info()

    @staticmethod
    def _pick(cells: list[Text], columns: list[str]) -> list[Text]:
        return cells if columns == _ALL else [cells[_INDEX[c]] for c in columns]

    def _cells(self, r: TaskSummary, now: int) -> list[Text]:
        key = r.key if r.key is not None else self.keys.get(r.id)
        return [
            Text("●", style="bold magenta") if r.id in self.selected else Text(" "),
            Text(r.id, style="dim"),
            safe_text(r.name, limit=40),
            safe_text(r.queue, limit=24),
            status_text(r.status)
            + (Text(" ✋", style="magenta") if r.cancel_requested_at_ms is not None else Text("")),
            Text(f"{r.attempt}/{r.max_attempts}"),
            Text(str(r.priority)),
            safe_text(key or "", limit=KEY_WIDTH),
            Text(age(r.created_at_ms, now)),
            Text(age(r.updated_at_ms, now)),
            due_in(r.run_at_ms, now) if r.status == "queued" else Text("—", style="dim"),
            safe_text(short_id(r.worker_id or "")),
            progress_bar(r.progress),
            safe_text(r.message or "", limit=60),
            error_cell(r),
        ]

    def _draw_info(self) -> None:
        page = self.page
        if page is None:
            return
        parts = []
        if page.total is not None:
            parts.append(f"{len(page.rows)} shown of {page.total} matching")
        elif page.order == "failure":
            parts.append(f"{len(page.rows)} error matches")
        else:
            what = "payload" if self.filter.search_kind == "payload" else "id (inside the id)"
            parts.append(
                f"{len(page.rows)} {what} matches "
                f"(searching {page.scan_limit or 0:,} tasks per page)"
            )
        if page.window_note:
            parts.append(page.window_note)
        if page.order not in ("key", "failure") and (
            self.sort_key != "created" or not self.sort_descending or self.time_range
        ):
            parts.append(self.order_note())
        if self.selected:
            parts.append(f"{len(self.selected)} selected")
        nav = []
        if page.has_previous:
            nav.append("[ newer")
        if page.has_next:
            nav.append("] next keys" if page.order == "key" else "] older")
        if nav:
            parts.append(" · ".join(nav))
        self.query_one("#tasks-info", Static).update(
            Text("  ·  ".join(parts), style="dim"), layout=False
        )

    # -- actions ------------------------------------------------------------------------

    def highlighted(self) -> TaskSummary | None:
        key = self.table.cursor_key
        if self.page is None or key is None:
            return None
        return next((r for r in self.page.rows if r.id == key), None)

    def targets(self) -> list[TaskSummary]:
        """The selected tasks on this page, or the highlighted one."""
        if self.page is not None and self.selected:
            chosen = [r for r in self.page.rows if r.id in self.selected]
            if chosen:
                return chosen
        row = self.highlighted()
        return [row] if row else []

    def action_open_task(self) -> None:
        row = self.highlighted()
        if row is not None:
            self.console.open_task(row.id)

    def action_toggle_select(self) -> None:
        row = self.highlighted()
        if row is None:
            return
        self.selected ^= {row.id}
        self.draw()

    def _clear_after(self) -> Callable[[], None] | None:
        """When the targets are the selection: what clears it once the write is confirmed
        (a selection never outlives its action, so a second key cannot act on it again)."""
        if self.page is None or not any(r.id in self.selected for r in self.page.rows):
            return None

        def clear() -> None:
            self.selected.clear()
            self.draw()

        return clear

    def action_cancel(self) -> None:
        self.console.controls.cancel_tasks(self.targets(), clear=self._clear_after())

    def _bulk_filter(self) -> TaskFilter | None:
        """The filter a bulk action works on: the name filter resolved to one name."""
        flt = self.filter
        if not flt.name:
            return flt
        if len(self.name_matches) == 1:
            return replace(flt, name=self.name_matches[0])
        self.app.notify(
            f"{len(self.name_matches)} task names contain {quoted(flt.name)}: "
            "narrow the name filter to one name first.",
            severity="warning",
            markup=False,
        )
        return None

    def action_cancel_matching(self) -> None:
        if (flt := self._bulk_filter()) is not None:
            self.console.controls.cancel_matching(flt)

    def action_retry(self) -> None:
        self.console.controls.retry_tasks(self.targets(), clear=self._clear_after())

    def action_retry_matching(self) -> None:
        if (flt := self._bulk_filter()) is not None:
            self.console.controls.retry_matching(flt)

    def action_replace(self) -> None:
        row = self.highlighted()
        if row is None:
            return
        key = row.key or self.keys.get(row.id)
        if key is None:
            self.app.notify("Replace works on a task that a key points at.", severity="warning")
            return
        self.console.controls.replace(row.id, key)

    def action_page_older(self) -> None:
        if self.page is not None and self.page.has_next:
            self.cursor_before, self.cursor_after = self.page.last_cursor, None
            self.console.refresh_now(force=True)

    def action_page_newer(self) -> None:
        if self.page is not None and self.page.has_previous:
            self.cursor_before, self.cursor_after = None, self.page.first_cursor
            self.console.refresh_now(force=True)

    def action_focus_search(self) -> None:
        self.query_one("#search", Input).focus()

    def action_focus_filters(self) -> None:
        self.query_one("#status-filter", Select).focus()

    def action_focus_queue_filter(self) -> None:
        self.query_one("#queue-filter", Select).focus()

    def action_focus_name_filter(self) -> None:
        self.query_one("#name-filter", Input).focus()

    def action_clear_filters(self) -> None:
        """Every filter and the search back to "any" (one refresh, from the newest)."""
        self._set_filters()
        self.table.focus()

    def _set_filters(self, *, queue: str | None = None) -> None:
        # Changing the widgets one by one would post a Changed (and a refresh) each:
        # hold those back, set them all, then apply once.
        with self.prevent(Select.Changed, Input.Changed):
            self.query_one("#status-filter", Select).clear()
            select = self.query_one("#queue-filter", Select)
            if queue is None:
                select.clear()
            else:
                if queue not in self.queue_options:
                    self.queue_options = [*self.queue_options, queue]
                    select.set_options([(q, q) for q in self.queue_options])
                select.value = queue
            self.query_one("#name-filter", Input).value = ""
            self.query_one("#search", Input).value = ""
        self._apply_filter()

    def action_clear(self) -> None:
        if self.selected:
            self.selected.clear()
            self.draw()
        self.table.focus()

    def show_queue(self, queue: str) -> None:
        """Show one queue's tasks (from the Queues view): the queue replaces every
        filter, so no status, name or search left from before narrows it unseen."""
        self._set_filters(queue=queue)
