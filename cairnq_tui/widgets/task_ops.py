"""The Tasks view's operator keys beyond the controls: the order (``s`` cycles the
time sorted by, ``S`` flips the direction) and time range (``t``: last 15 m, 1 h,
24 h, a custom range, any time) of the list; run now and delay by (writes,
through ``ScheduleControls``), copy a task's id or JSON to the clipboard, and export
the filtered list to JSON lines or CSV.

An export reads the list page by page through ``Inspector.tasks_page`` (the same
filter, order and search the view shows), at most ``EXPORT_CAP`` tasks, and says
how many it wrote and whether the cap stopped it. ``.csv`` writes CSV, any other
name JSON lines; an existing file is never overwritten.
"""

from __future__ import annotations

import csv
import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual import work

from cairnq_tui.controls import ScheduleControls
from cairnq_tui.formatting import clean
from cairnq_tui.screens.prompt import PromptScreen
from engine.inspection import Inspector, TaskFilter, TaskSummary, parse_duration

if TYPE_CHECKING:
    from cairnq_tui.ports import Console

#: What ``t`` cycles through: (label, how far back in ms; None = any time).
TIME_RANGES: list[tuple[str, int | None]] = [
    ("any time", None),
    ("last 15m", 900_000),
    ("last 1h", 3_600_000),
    ("last 24h", 86_400_000),
]
SORT_ORDER = ("created", "due", "updated", "completed")


def parse_range(text: str) -> tuple[int, int | None]:
    """``"3h"`` (from 3 h ago until now) or ``"6h..2h"`` (from 6 h ago until 2 h ago)
    -> (ms back to the start, ms back to the end or None).

    Raises:
        ValueError: not one or two durations, or a start not before the end.
    """
    start, sep, end = text.partition("..")
    back = parse_duration(start)
    until = parse_duration(end) if sep else None
    if until is not None and until >= back:
        raise ValueError(f"{text!r}: the start ({start.strip()} ago) must be before the end")
    return back, until


#: The most tasks one export writes.
EXPORT_CAP = 10_000
EXPORT_PAGE = 500
FIELDS = [f.name for f in dataclasses.fields(TaskSummary)]


async def export_tasks(inspector: Inspector, flt: TaskFilter, path: Path) -> tuple[int, bool]:
    """Write the tasks matching ``flt`` to ``path``; returns (written, capped).

    Raises:
        FileExistsError: ``path`` exists (nothing written).
    """
    written, cursor, capped = 0, None, False
    as_csv = path.suffix.lower() == ".csv"
    with path.open("x", encoding="utf-8", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=FIELDS) if as_csv else None
        if writer is not None:
            writer.writeheader()
        while True:
            page = await inspector.tasks_page(flt, before=cursor, limit=EXPORT_PAGE)
            for row in page.rows:
                if written >= EXPORT_CAP:
                    capped = True
                    break
                record = dataclasses.asdict(row)
                if writer is not None:
                    writer.writerow(record)
                else:
                    out.write(json.dumps(record, ensure_ascii=False) + "\n")
                written += 1
            if capped or not page.has_next or not page.rows:
                break
            cursor = page.last_cursor
    return written, capped


class TaskOps:
    """Mixin of the Tasks view (before the Textual class): the keys above."""

    if TYPE_CHECKING:
        console: Console
        filter: TaskFilter
        app: Any
        cursor_before: str | None
        cursor_after: str | None

        def highlighted(self) -> TaskSummary | None: ...

    #: The list's order and time range (``s``, ``S``, ``t``), applied on every refresh.
    sort_key: str = "created"
    sort_descending: bool = True
    time_range: tuple[str, int, int | None] | None = None  # (label, back ms, until-back ms)

    def with_order(self, flt: TaskFilter) -> TaskFilter:
        """``flt`` with the chosen order and the time range placed at the clock's now."""
        now = self.console.clock()
        since = until = None
        if self.time_range is not None:
            _, back, until_back = self.time_range
            since = now - back
            until = now - until_back if until_back is not None else None
        return dataclasses.replace(
            flt,
            sort=self.sort_key,  # type: ignore[arg-type]
            descending=self.sort_descending,
            since_ms=since,
            until_ms=until,
        )

    def order_note(self) -> str:
        arrow = "newest first" if self.sort_descending else "oldest first"
        note = f"by {self.sort_key} time, {arrow}"
        if self.time_range is not None:
            note += f" · {self.time_range[0]} ({self.sort_key})"
        return note

    def _reorder(self) -> None:
        self.filter = self.with_order(self.filter)
        self.cursor_before = self.cursor_after = None
        self.console.refresh_now(force=True)

    def action_next_sort(self) -> None:
        self.sort_key = SORT_ORDER[(SORT_ORDER.index(self.sort_key) + 1) % len(SORT_ORDER)]
        self._reorder()

    def action_flip_sort(self) -> None:
        self.sort_descending = not self.sort_descending
        self._reorder()

    def action_next_time_range(self) -> None:
        labels = [label for label, _ in TIME_RANGES]
        current = self.time_range[0] if self.time_range is not None else "any time"
        index = labels.index(current) + 1 if current in labels else len(labels)
        if index == len(labels):
            self._ask_range()
            return
        label, back = TIME_RANGES[index]
        self.time_range = None if back is None else (label, back, None)
        self._reorder()

    def _ask_range(self) -> None:
        def got(text: str | None) -> None:
            if text is None:
                return
            if not text.strip():
                self.time_range = None
                self._reorder()
                return
            try:
                back, until = parse_range(text)
            except ValueError as exc:
                self.app.notify(str(exc), severity="warning", markup=False)
                return
            label = f"from {text.split('..')[0].strip()} ago" + (
                f" to {text.split('..')[1].strip()} ago" if until is not None else ""
            )
            self.time_range = (label, back, until)
            self._reorder()

        self.app.push_screen(
            PromptScreen(
                "Time range: how far back (e.g. 3h), or from..to ago (6h..2h); empty = any time",
                "3h",
            ),
            got,
        )

    def _schedule(self) -> ScheduleControls | None:
        controls = self.console.controls
        return controls if isinstance(controls, ScheduleControls) else None

    def action_run_now(self) -> None:
        row, controls = self.highlighted(), self._schedule()
        if row is not None and controls is not None:
            controls.run_now(row.id, row.name, row.status, row.run_at_ms, self.console.clock())

    def action_delay(self) -> None:
        row, controls = self.highlighted(), self._schedule()
        if row is not None and controls is not None:
            controls.delay(row.id, row.name, row.status, row.run_at_ms, self.console.clock())

    def action_copy_id(self) -> None:
        row = self.highlighted()
        if row is not None:
            self.app.copy_to_clipboard(row.id)
            self.app.notify(f"Copied {row.id}", timeout=2)

    def action_copy_json(self) -> None:
        row = self.highlighted()
        if row is not None:
            self._copy_json(row.id)

    @work(group="copy", exit_on_error=False)
    async def _copy_json(self, task_id: str) -> None:
        task = await self.console.client.get(task_id)
        if task is None:
            self.app.notify(f"{task_id} is gone (purged).", severity="warning")
            return
        self.app.copy_to_clipboard(json.dumps(dataclasses.asdict(task), ensure_ascii=False))
        self.app.notify(f"Copied the JSON of {task_id}", timeout=2)

    def action_export(self) -> None:
        flt = self.filter

        def got(text: str | None) -> None:
            if text:
                self._export(flt, Path(text).expanduser())

        self.app.push_screen(
            PromptScreen(
                f"Export the filtered list (at most {EXPORT_CAP:,} tasks): a path ending "
                ".csv writes CSV, any other JSON lines",
                "tasks.jsonl",
            ),
            got,
        )

    @work(group="export", exit_on_error=False)
    async def _export(self, flt: TaskFilter, path: Path) -> None:
        try:
            written, capped = await export_tasks(self.console.inspector, flt, path)
        except FileExistsError:
            self.app.notify(
                f"{clean(path)} exists: nothing written.", severity="warning", markup=False
            )
            return
        except OSError as exc:
            self.app.notify(
                f"Cannot write {clean(path)}: {exc.strerror}", severity="error", markup=False
            )
            return
        more = f" (stopped at the cap of {EXPORT_CAP:,})" if capped else ""
        self.app.notify(f"Exported {written:,} task(s) to {clean(path)}{more}.", markup=False)
