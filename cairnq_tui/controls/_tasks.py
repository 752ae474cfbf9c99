"""Cancel and retry: the highlighted task or a selection, everything matching a
filter (counted first, capped), or what a key points at.

Cancelling a queued task ends it; cancelling a running one only records a
request: the task keeps running until its handler checks ``ctx.canceled()``
and stops (or its worker settles it another way). The confirmation and the
report say which of the two each task got.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any

from cairnq_tui import actions
from cairnq_tui.actions import BULK_CAP, LIVE, RETRYABLE
from cairnq_tui.controls._write_path import WritePath
from cairnq_tui.formatting import clean, quoted
from cairnq_tui.ports import TaskLike
from cairnq_tui.screens.prompt import PromptScreen
from engine import Task
from engine.inspection import TaskFilter

#: What a cancel request means for a running task, said wherever one is made.
ONLY_REQUESTED = (
    "a running task only gets a cancel request: it stops when its handler checks "
    "ctx.canceled(), and runs on until then"
)


def describe_filter(flt: TaskFilter) -> str:
    parts = [f"{k}={quoted(v)}" for k in ("status", "queue", "name") if (v := getattr(flt, k))]
    if flt.active_search:
        parts.append(f"{flt.search_kind} search {quoted(flt.search)}")
    return ", ".join(parts) or "no filter"


def cancel_effect(status: str) -> str:
    return {
        "queued": "queued → canceled",
        "running": "running → cancel requested (runs until its handler checks)",
    }.get(status, f"{status}: unchanged (not live)")


def status_phrase(task: Task) -> str:
    if task.status == "running" and task.cancel_requested:
        return "running with a cancel request (it stops when its handler checks ctx.canceled())"
    return task.status


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'s' * (n != 1)}"


def _listed(tasks: Sequence[TaskLike], line: Callable[[TaskLike], str]) -> list[str]:
    lines = [line(t) for t in tasks[:12]]
    if len(tasks) > 12:
        lines.append(f"… and {len(tasks) - 12} more")
    return lines


class TaskControls(WritePath):
    """Cancel and retry."""

    def _states_now(self, ids: Sequence[str]) -> Callable[[], Awaitable[str]]:
        """A check after an abandon: the statuses of ``ids`` as they are now."""

        async def verify() -> str:
            seen: Counter[str] = Counter()
            for task_id in ids:
                task = await self.app.client.get(task_id)
                seen["gone" if task is None else status_phrase(task).split(" (")[0]] += 1
            return "now " + ", ".join(f"{n} {state}" for state, n in sorted(seen.items())) + "."

        return verify

    # -- cancel ---------------------------------------------------------------------------

    def cancel_tasks(
        self, tasks: Sequence[TaskLike], *, clear: Callable[[], None] | None = None
    ) -> None:
        """Cancel the given tasks (one, or the selection) after confirming."""
        if not self._allowed() or not tasks:
            return
        lines = _listed(tasks, lambda t: f"{t.id}  {clean(t.name)}  {cancel_effect(t.status)}")
        if any(t.status == "running" for t in tasks):
            lines.append(f"Note: {ONLY_REQUESTED}.")
        ids = [t.id for t in tasks]
        self.confirm_write(
            f"Cancel {_plural(len(ids), 'task')}?",
            lines,
            lambda _: self._cancel_ids(ids, cleared=clear is not None),
            what=f"cancel {_plural(len(ids), 'task')}",
            confirm_label="Cancel tasks",
            verify=self._states_now(ids),
            confirmed=clear,
        )

    def cancel_matching(self, flt: TaskFilter) -> None:
        """Cancel every live task matching ``flt`` (at most ``BULK_CAP``), counted first."""
        if not self._allowed():
            return

        async def count() -> None:
            ids = await self.app.inspector.matching_ids(flt, statuses=LIVE, cap=BULK_CAP)
            self.app.call_later(self._confirm_bulk, "Cancel", flt, ids)

        self._read(count, "count")

    def _confirm_bulk(self, verb: str, flt: TaskFilter, ids: list[str]) -> None:
        if not ids:
            self.app.notify(
                f"No task matching {describe_filter(flt)} can be {verb.lower()}ed.", markup=False
            )
            return
        capped = f" (capped at {BULK_CAP:,})" if len(ids) >= BULK_CAP else ""
        what = "live (queued or running)" if verb == "Cancel" else "failed or canceled"
        lines = [
            f"{len(ids):,} {what} tasks matching {describe_filter(flt)}{capped}.",
            f"Queued ones become canceled; {ONLY_REQUESTED}."
            if verb == "Cancel"
            else "Each goes back to queued, due now, error cleared.",
            f"Newest: {ids[0]}   oldest: {ids[-1]}",
        ]

        def job(answer: dict[str, Any]) -> Coroutine[Any, Any, None]:
            if verb == "Cancel":
                return self._cancel_ids(ids)
            return self._retry_ids(ids, answer.get("reset", False))

        self.confirm_write(
            f"{verb} {len(ids):,} tasks?",
            lines,
            job,
            what=f"{verb.lower()} {_plural(len(ids), 'task')} matching {describe_filter(flt)}",
            confirm_label=f"{verb} {len(ids):,}",
            verify=self._states_now(ids),
            reset_option=verb == "Retry",
        )

    async def _cancel_ids(self, ids: Sequence[str], *, cleared: bool = False) -> None:
        changed = await actions.cancel_ids(self.app.client, ids)
        ended = sum(1 for after in changed if after.status == "canceled")
        requested = len(changed) - ended
        parts = [f"Canceled {_plural(ended, 'task')}"]
        if requested:
            parts.append(
                f"requested the cancel of {_plural(requested, 'running task')}: they stop "
                "when their handlers check ctx.canceled(), and run on until then"
            )
        if skipped := len(ids) - ended - requested:
            parts.append(f"{skipped} were no longer live")
        if cleared:
            parts.append("the selection was cleared")
        self._finish("; ".join(parts) + ".")

    def cancel_by_key(self, key: str | None = None) -> None:
        """Cancel what a key points at (asks for the key when not given)."""
        if not self._allowed():
            return
        self._with_key(key, "Cancel by key", self._confirm_key_cancel)

    def _with_key(
        self, key: str | None, title: str, then: Callable[[str], Coroutine[Any, Any, None]]
    ) -> None:
        if key:
            self._read(lambda: then(key), "lookup")
            return

        def got(value: str | None) -> None:
            if value:
                self._read(lambda: then(value), "lookup")

        self.app.push_screen(PromptScreen(title, "key"), got)

    def _key_now(self, key: str) -> Callable[[], Awaitable[str]]:
        async def verify() -> str:
            task = await self.app.client.get_by_key(key)
            if task is None:
                return f"key {quoted(key)} points at no task."
            return f"key {quoted(key)} points at {task.id}, {status_phrase(task)}."

        return verify

    async def _confirm_key_cancel(self, key: str) -> None:
        task = await self.app.client.get_by_key(key)
        if task is None:
            self._finish(f"No task under key {quoted(key)}.", "warning")
            return
        lines = [f"key {quoted(key)} → {task.id}  {clean(task.name)}", cancel_effect(task.status)]
        if task.status == "running":
            lines.append(f"Note: {ONLY_REQUESTED}.")

        async def job(_: dict[str, Any]) -> None:
            after = await self.app.client.cancel_by_key(key)
            if after is None:
                self._finish(f"Key {quoted(key)}: nothing live to cancel.", "warning")
            else:
                self._finish(f"Key {quoted(key)}: {after.id} is now {status_phrase(after)}.")

        self.app.call_later(
            self.confirm_write,
            f"Cancel the task of key {quoted(key)}?",
            lines,
            job,
            what=f"cancel the task of key {quoted(key)}",
            confirm_label="Cancel it",
            verify=self._key_now(key),
        )

    # -- retry ------------------------------------------------------------------------------------

    def retry_tasks(
        self, tasks: Sequence[TaskLike], *, clear: Callable[[], None] | None = None
    ) -> None:
        """Retry the given failed/canceled tasks after confirming (attempts reset or not)."""
        if not self._allowed() or not tasks:
            return
        eligible = [t for t in tasks if t.status in RETRYABLE]
        if not eligible:
            self.app.notify("Only failed or canceled tasks can be retried.", severity="warning")
            return
        lines = _listed(
            eligible,
            lambda t: (
                f"{t.id}  {clean(t.name)}  {t.status} → queued "
                f"(attempt {t.attempt}/{t.max_attempts})"
            ),
        )
        if len(eligible) < len(tasks):
            lines.append(
                f"{len(tasks) - len(eligible)} selected task(s) are not retryable: skipped."
            )
        ids = [t.id for t in eligible]
        self.confirm_write(
            f"Retry {_plural(len(ids), 'task')}?",
            lines,
            lambda answer: self._retry_ids(ids, answer["reset"], cleared=clear is not None),
            what=f"retry {_plural(len(ids), 'task')}",
            confirm_label="Retry",
            verify=self._states_now(ids),
            reset_option=True,
            confirmed=clear,
        )

    def retry_matching(self, flt: TaskFilter) -> None:
        """Retry every failed/canceled task matching ``flt`` (capped), counted first."""
        if not self._allowed():
            return

        async def count() -> None:
            ids = await self.app.inspector.matching_ids(flt, statuses=RETRYABLE, cap=BULK_CAP)
            self.app.call_later(self._confirm_bulk, "Retry", flt, ids)

        self._read(count, "count")

    async def _retry_ids(self, ids: Sequence[str], reset: bool, *, cleared: bool = False) -> None:
        changed = len(await actions.retry_ids(self.app.client, ids, reset))
        skipped = len(ids) - changed
        extra = f"; {skipped} were no longer failed or canceled" if skipped else ""
        how = " with attempts reset" if reset else ""
        cleared_note = "; the selection was cleared" if cleared else ""
        self._finish(f"Requeued {changed} task(s){how}{extra}{cleared_note}.")

    def retry_by_key(self, key: str | None = None) -> None:
        """Retry what a key points at (asks for the key when not given)."""
        if not self._allowed():
            return
        self._with_key(key, "Retry by key", self._confirm_key_retry)

    async def _confirm_key_retry(self, key: str) -> None:
        task = await self.app.client.get_by_key(key)
        if task is None:
            self._finish(f"No task under key {quoted(key)}.", "warning")
            return
        if task.status not in RETRYABLE:
            self._finish(
                f"Key {quoted(key)} points at {task.id}, which is {task.status}: not retryable.",
                "warning",
            )
            return
        lines = [
            f"key {quoted(key)} → {task.id}  {clean(task.name)}",
            f"{task.status} → queued (attempt {task.attempt}/{task.max_attempts})",
        ]

        async def job(answer: dict[str, Any]) -> None:
            after = await self.app.client.retry_by_key(key, reset_attempt=answer["reset"])
            if after is None:
                self._finish(f"Key {quoted(key)}: nothing to retry any more.", "warning")
            else:
                self._finish(f"Key {quoted(key)}: {after.id} requeued.")

        self.app.call_later(
            self.confirm_write,
            f"Retry the task of key {quoted(key)}?",
            lines,
            job,
            what=f"retry the task of key {quoted(key)}",
            confirm_label="Retry it",
            verify=self._key_now(key),
            reset_option=True,
        )
