"""The Tasks view's operator keys beyond the controls: run now and delay by (writes,
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

from cairnq_tui.controls_schedule import ScheduleControls
from cairnq_tui.formatting import clean
from cairnq_tui.screens.prompt import PromptScreen
from engine.inspection import Inspector, TaskFilter, TaskSummary

if TYPE_CHECKING:
    from cairnq_tui.ports import Console

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

        def highlighted(self) -> TaskSummary | None: ...

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
