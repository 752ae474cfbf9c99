"""Run now and delay by: the console's writes on a queued task's due time.

Built on the one write path (``WritePath.confirm_write``: read-only refusal, a
confirmation that says what changes, a danger target's name, the write in a
``control`` worker, pending and abandon, the outcome as a ``ControlFinished``).
The engine's ``run_now`` makes a queued task due now (an earlier due time is
kept); ``delay`` pushes it back from its due time (from now if already due);
anything but a queued task is refused (``NotQueued``) and nothing is written.
"""

from __future__ import annotations

from typing import Any

from cairnq_tui.controls._write_path import WritePath
from cairnq_tui.formatting import clean, duration
from cairnq_tui.screens.prompt import PromptScreen
from cairnq_tui.why import clock_time
from engine import NotQueued
from engine.inspection import parse_duration


class ScheduleControls(WritePath):
    """``run_now`` and ``delay`` on one task."""

    def _queued(self, what: str, status: str) -> bool:
        if status == "queued":
            return True
        self.app.notify(f"{what} works on a queued task; this one is {status}.", severity="warning")
        return False

    def run_now(self, task_id: str, name: str, status: str, run_at_ms: int, now_ms: int) -> None:
        """Make a delayed queued task due now, after confirming."""
        if not self._allowed() or not self._queued("Run now", status):
            return
        due = "already due" if run_at_ms <= now_ms else f"due {clock_time(run_at_ms)}"
        lines = [f"{task_id}  {clean(name)}  queued, {due} → due now"]

        async def job(_: dict[str, Any]) -> None:
            try:
                task = await self.app.client.run_now(task_id)
            except NotQueued as exc:
                self._finish(
                    f"Not changed: {task_id} is {exc.status or 'gone'}, not queued.", "warning"
                )
                return
            self._finish(f"{task.id} is due now ({clock_time(task.run_at_ms)}).")

        self.confirm_write(
            "Run this task now?", lines, job, what=f"run {task_id} now", confirm_label="Run now"
        )

    def delay(self, task_id: str, name: str, status: str, run_at_ms: int, now_ms: int) -> None:
        """Ask for a duration, then push a queued task back by it, after confirming."""
        if not self._allowed() or not self._queued("Delay", status):
            return

        def got(text: str | None) -> None:
            if not text:
                return
            try:
                ms = parse_duration(text)
            except ValueError as exc:
                self.app.notify(str(exc), severity="warning", markup=False)
                return
            base = max(run_at_ms, now_ms)
            lines = [
                f"{task_id}  {clean(name)}  queued",
                f"due {clock_time(base)} → {clock_time(base + ms)} (+{duration(ms)})",
            ]

            async def job(_: dict[str, Any]) -> None:
                try:
                    task = await self.app.client.delay(task_id, ms)
                except NotQueued as exc:
                    self._finish(
                        f"Not changed: {task_id} is {exc.status or 'gone'}, not queued.",
                        "warning",
                    )
                    return
                self._finish(f"{task.id} is now due {clock_time(task.run_at_ms)}.")

            self.confirm_write(
                f"Delay this task by {duration(ms)}?",
                lines,
                job,
                what=f"delay {task_id} by {duration(ms)}",
                confirm_label="Delay",
            )

        self.app.push_screen(PromptScreen("Delay by (e.g. 30s, 15m, 2h, 1d)", "15m"), got)
