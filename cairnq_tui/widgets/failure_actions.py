"""Retry, cancel or purge a whole failure group, through the console's controls.

A group action reads the group's selection (``Inspector.failure_selection``: the
exact count in the window and the newest ``BULK_CAP`` ids), then hands the ids to
the same controls the Tasks view uses (``retry_tasks`` / ``cancel_tasks`` /
``purge_tasks``), so the
confirmation shows the exact count and read-only mode and danger targets apply
as to every write.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual.app import App

from cairnq_tui.formatting import quoted
from cairnq_tui.ports import Console
from engine.inspection import FailureSelection

#: The most tasks one group action touches (the newest of the group).
GROUP_CAP = 1_000
#: Tasks read in full to describe the first lines of a confirmation.
DESCRIBED = 12


@dataclass(frozen=True)
class GroupTask:
    """A task of a failure group as a control describes it."""

    id: str
    name: str
    status: str
    attempt: int
    max_attempts: int


def describe_group(name: str, error_type: str, message: str) -> str:
    return f"{quoted(name)} {error_type}: {message}"


async def group_tasks(console: Console, selection: FailureSelection) -> list[GroupTask]:
    """The selection's tasks; the first ``DESCRIBED`` read anew (status, attempts)."""
    out: list[GroupTask] = []
    for i, task_id in enumerate(selection.task_ids):
        task = await console.client.get(task_id) if i < DESCRIBED else None
        if i < DESCRIBED and task is None:
            continue  # purged meanwhile
        if task is not None:
            out.append(GroupTask(task.id, task.name, task.status, task.attempt, task.max_attempts))
        else:
            out.append(GroupTask(task_id, selection.name, "failed", 0, 0))
    return out


async def start_group_action(
    console: Console, app: App[Any], key: tuple[str, str, str], window_ms: int | None, verb: str
) -> None:
    """Read the group's selection, then open the control's confirmation (exact count)."""
    selection = await console.inspector.failure_selection(key, window_ms=window_ms, limit=GROUP_CAP)
    what = describe_group(*key)
    if selection.count == 0:
        app.notify(f"No failed task left in the group {what}.", markup=False)
        return
    if selection.truncated:
        app.notify(
            f"The group {what} holds {selection.count:,} failed tasks in this window: "
            f"the {verb} covers the newest {len(selection.task_ids):,}; run it again "
            "for the rest.",
            severity="warning",
            markup=False,
        )
    tasks = await group_tasks(console, selection)
    controls = console.controls
    if verb == "retry":
        app.call_later(controls.retry_tasks, tasks)
    elif verb == "purge":
        app.call_later(controls.purge_tasks, tasks)
    else:
        app.call_later(controls.cancel_tasks, tasks)
