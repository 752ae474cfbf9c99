"""The console's writes: submit, cancel, retry, replace, purge — each confirmed first.

Every control shows a dialog that says exactly what will change, and only then
runs the write in a worker (group ``control``) through the engine's client. The
outcome comes back as a ``ControlFinished`` message. In read-only mode nothing
here runs (the actions are disabled, and the store refuses writes anyway).

The controls see the app as a ``Console`` (``ports.py``), so this module does
not import the app, which builds them.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Sequence
from typing import Any, Protocol

from cairnq_tui.formatting import clean, duration, quoted
from cairnq_tui.messages import ControlFinished
from cairnq_tui.ports import Console
from cairnq_tui.screens.confirm import ConfirmScreen
from cairnq_tui.screens.prompt import PromptScreen
from cairnq_tui.screens.purge import PurgeRequest, PurgeScreen
from cairnq_tui.screens.submit import SubmitRequest, SubmitScreen
from engine import AlreadyExists, Task, TaskRef
from engine.inspection import TaskFilter

#: The most tasks one "all matching" cancel or retry touches.
BULK_CAP = 1_000
LIVE = ("queued", "running")
RETRYABLE = ("failed", "canceled")


class TaskLike(Protocol):
    """What a control needs to describe a task (a Task, TaskSummary or LeaseInfo)."""

    @property
    def id(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def attempt(self) -> int: ...
    @property
    def max_attempts(self) -> int: ...


def _describe_filter(flt: TaskFilter) -> str:
    parts = [f"{k}={quoted(v)}" for k in ("status", "queue", "name") if (v := getattr(flt, k))]
    if flt.active_search:
        parts.append(f"{flt.search_kind} search {quoted(flt.search)}")
    return ", ".join(parts) or "no filter"


def _cancel_effect(status: str) -> str:
    return {"queued": "queued → canceled", "running": "running → cancel requested"}.get(
        status, f"{status}: unchanged (not live)"
    )


class Controls:
    """Dialogs and workers for every write; owned by the app."""

    def __init__(self, app: Console) -> None:
        self.app = app

    def _allowed(self) -> bool:
        if self.app.read_only:
            self.app.notify("Read-only: controls are disabled.", severity="warning")
            return False
        return True

    def _confirm(
        self,
        title: str,
        lines: Sequence[str],
        run: Callable[[dict[str, Any]], None],
        *,
        confirm_label: str,
        reset_option: bool = False,
        back: Callable[[], None] | None = None,
    ) -> None:
        def done(answer: dict[str, Any] | None) -> None:
            if answer is not None:
                run(answer)
            elif back is not None:
                back()

        self.app.push_screen(
            ConfirmScreen(title, lines, confirm_label=confirm_label, reset_option=reset_option),
            done,
        )

    def _run(self, job: Callable[[], Coroutine[Any, Any, None]], name: str) -> None:
        self.app.run_worker(job(), group="control", name=name, exit_on_error=False)

    def _finish(self, summary: str, severity: str = "information", **kwargs: Any) -> None:
        self.app.post_message(ControlFinished(summary, severity, **kwargs))

    # -- cancel ---------------------------------------------------------------------------

    def cancel_tasks(self, tasks: Sequence[TaskLike]) -> None:
        """Cancel the given tasks (one, or the selection) after confirming."""
        if not self._allowed() or not tasks:
            return
        lines = [f"{t.id}  {clean(t.name)}  {_cancel_effect(t.status)}" for t in tasks[:12]]
        if len(tasks) > 12:
            lines.append(f"… and {len(tasks) - 12} more")
        ids = [t.id for t in tasks]
        self._confirm(
            f"Cancel {len(ids)} task{'s' * (len(ids) != 1)}?",
            lines,
            lambda _: self._run(lambda: self._cancel_ids(ids), "cancel"),
            confirm_label="Cancel tasks",
        )

    def cancel_matching(self, flt: TaskFilter, describe_queues: str = "") -> None:
        """Cancel every live task matching ``flt`` (at most ``BULK_CAP``), counted first."""
        if not self._allowed():
            return

        async def count() -> None:
            ids = await self.app.inspector.matching_ids(flt, statuses=LIVE, cap=BULK_CAP)
            self.app.call_later(self._confirm_bulk, "Cancel", flt, ids, self._cancel_ids)

        self._run(count, "count")

    def _confirm_bulk(
        self, verb: str, flt: TaskFilter, ids: list[str], job: Callable[..., Any]
    ) -> None:
        if not ids:
            self.app.notify(
                f"No task matching {_describe_filter(flt)} can be {verb.lower()}ed.", markup=False
            )
            return
        capped = f" (capped at {BULK_CAP:,})" if len(ids) >= BULK_CAP else ""
        what = "live (queued or running)" if verb == "Cancel" else "failed or canceled"
        lines = [
            f"{len(ids):,} {what} tasks matching {_describe_filter(flt)}{capped}.",
            "Queued ones become canceled; running ones get a cancel request."
            if verb == "Cancel"
            else "Each goes back to queued, due now, error cleared.",
            f"Newest: {ids[0]}   oldest: {ids[-1]}",
        ]

        def run(answer: dict[str, Any]) -> None:
            if verb == "Cancel":
                self._run(lambda: job(ids), "cancel")
            else:
                self._run(lambda: job(ids, answer.get("reset", False)), "retry")

        self._confirm(
            f"{verb} {len(ids):,} tasks?",
            lines,
            run,
            confirm_label=f"{verb} {len(ids):,}",
            reset_option=verb == "Retry",
        )

    async def _cancel_ids(self, ids: Sequence[str]) -> None:
        changed = 0
        for task_id in ids:
            if await self.app.client.cancel(task_id) is not None:
                changed += 1
        skipped = len(ids) - changed
        extra = f"; {skipped} were no longer live" if skipped else ""
        self._finish(f"Canceled or cancel-requested {changed} task(s){extra}.")

    def cancel_by_key(self, key: str | None = None) -> None:
        """Cancel what a key points at (asks for the key when not given)."""
        if not self._allowed():
            return
        self._with_key(key, "Cancel by key", self._confirm_key_cancel)

    def _with_key(self, key: str | None, title: str, then: Callable[[str], Any]) -> None:
        if key:
            self._run(lambda: then(key), "lookup")
            return

        def got(value: str | None) -> None:
            if value:
                self._run(lambda: then(value), "lookup")

        self.app.push_screen(PromptScreen(title, "key"), got)

    async def _confirm_key_cancel(self, key: str) -> None:
        task = await self.app.client.get_by_key(key)
        if task is None:
            self._finish(f"No task under key {quoted(key)}.", "warning")
            return
        lines = [f"key {quoted(key)} → {task.id}  {clean(task.name)}", _cancel_effect(task.status)]

        async def job() -> None:
            after = await self.app.client.cancel_by_key(key)
            if after is None:
                self._finish(f"Key {quoted(key)}: nothing live to cancel.", "warning")
            else:
                self._finish(f"Key {quoted(key)}: {after.id} is now {self._status_phrase(after)}.")

        self.app.call_later(
            self._confirm,
            f"Cancel the task of key {quoted(key)}?",
            lines,
            lambda _: self._run(job, "cancel"),
            confirm_label="Cancel it",
        )

    @staticmethod
    def _status_phrase(task: Task) -> str:
        if task.status == "running" and task.cancel_requested:
            return "running with a cancel request"
        return task.status

    # -- retry ------------------------------------------------------------------------------------

    def retry_tasks(self, tasks: Sequence[TaskLike]) -> None:
        """Retry the given failed/canceled tasks after confirming (attempts reset or not)."""
        if not self._allowed() or not tasks:
            return
        eligible = [t for t in tasks if t.status in RETRYABLE]
        if not eligible:
            self.app.notify("Only failed or canceled tasks can be retried.", severity="warning")
            return
        lines = [
            f"{t.id}  {clean(t.name)}  {t.status} → queued (attempt {t.attempt}/{t.max_attempts})"
            for t in eligible[:12]
        ]
        if len(eligible) > 12:
            lines.append(f"… and {len(eligible) - 12} more")
        if len(eligible) < len(tasks):
            lines.append(
                f"{len(tasks) - len(eligible)} selected task(s) are not retryable: skipped."
            )
        ids = [t.id for t in eligible]
        self._confirm(
            f"Retry {len(ids)} task{'s' * (len(ids) != 1)}?",
            lines,
            lambda answer: self._run(lambda: self._retry_ids(ids, answer["reset"]), "retry"),
            confirm_label="Retry",
            reset_option=True,
        )

    def retry_matching(self, flt: TaskFilter) -> None:
        """Retry every failed/canceled task matching ``flt`` (capped), counted first."""
        if not self._allowed():
            return

        async def count() -> None:
            ids = await self.app.inspector.matching_ids(flt, statuses=RETRYABLE, cap=BULK_CAP)
            self.app.call_later(self._confirm_bulk, "Retry", flt, ids, self._retry_ids)

        self._run(count, "count")

    async def _retry_ids(self, ids: Sequence[str], reset: bool) -> None:
        changed = 0
        for task_id in ids:
            if await self.app.client.retry(task_id, reset_attempt=reset) is not None:
                changed += 1
        skipped = len(ids) - changed
        extra = f"; {skipped} were no longer failed or canceled" if skipped else ""
        how = " with attempts reset" if reset else ""
        self._finish(f"Requeued {changed} task(s){how}{extra}.")

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

        async def job(reset: bool) -> None:
            after = await self.app.client.retry_by_key(key, reset_attempt=reset)
            if after is None:
                self._finish(f"Key {quoted(key)}: nothing to retry any more.", "warning")
            else:
                self._finish(f"Key {quoted(key)}: {after.id} requeued.")

        self.app.call_later(
            self._confirm,
            f"Retry the task of key {quoted(key)}?",
            lines,
            lambda answer: self._run(lambda: job(answer["reset"]), "retry"),
            confirm_label="Retry it",
            reset_option=True,
        )

    # -- submit and replace ----------------------------------------------------------------------

    def submit(self, prefill: SubmitRequest | None = None) -> None:
        """Open the submit dialog (``prefill`` for a replace)."""
        if not self._allowed():
            return
        screen = SubmitScreen(names=self.app.names, queues=self.app.known_queues, prefill=prefill)
        self.app.push_screen(screen, self._confirm_submit)

    def replace(self, task_id: str, key: str | None = None) -> None:
        """Replace a keyed task: a new one under its key, its payload prefilled."""
        if not self._allowed():
            return

        async def load() -> None:
            task = await self.app.client.get(task_id)
            keys = (
                [key]
                if key
                else (await self.app.inspector.keys_for_tasks([task_id])).get(task_id, [])
            )
            if task is None or not keys:
                self._finish("Replace needs a task that a key points at.", "warning")
                return
            prefill = SubmitRequest(
                name=task.name,
                payload=task.payload,
                key=keys[0],
                conflict="replace",
                queue=task.queue,
                priority=task.priority,
                delay_ms=0,
                max_attempts=task.max_attempts,
                replacing=task.id,
                replacing_status=task.status,
            )
            self.app.call_later(self.submit, prefill)

        self._run(load, "lookup")

    def _confirm_submit(self, request: SubmitRequest | None) -> None:
        if request is None:
            return
        if request.key and request.conflict == "replace":
            # Confirm against the task the key points at now, not when the form opened.
            async def look_up() -> None:
                current = await self.app.client.get_status_by_key(str(request.key))
                self.app.call_later(self._show_submit_confirmation, request, current, True)

            self._run(look_up, "lookup")
            return
        self._show_submit_confirmation(request, None, False)

    def _show_submit_confirmation(
        self, request: SubmitRequest, current: TaskRef | None, looked_up: bool
    ) -> None:
        lines = [
            f"name {quoted(request.name)} on queue {quoted(request.queue)}",
            f"payload {clean(request.payload_preview())}",
            f"priority {request.priority}, max attempts {request.max_attempts}, "
            f"delay {duration(request.delay_ms) if request.delay_ms else 'none'}",
        ]
        if request.key:
            lines.append(f"key {quoted(request.key)}, conflict {request.conflict!r}")
        if looked_up:
            if request.replacing and (current is None or current.id != request.replacing):
                now = f"now points at {current.id} ({current.status})" if current else "is free now"
                lines.append(
                    f"The key moved since this dialog opened: it {now}, "
                    f"no longer at {request.replacing}."
                )
            if current is not None:
                lines.append(
                    f"{current.id} ({current.status}) is canceled if still live; "
                    "the key moves to the new task"
                )
            else:
                lines.append("No task holds the key: the new task simply takes it")
        self._confirm(
            "Submit this task?",
            lines,
            lambda _: self._run(lambda: self._submit(request), "submit"),
            confirm_label="Submit",
            back=lambda: self.submit(request),  # back to the filled form
        )

    async def _submit(self, request: SubmitRequest) -> None:
        # One engine call: the outcome says what happened, the error who holds the key.
        try:
            outcome = await self.app.client.submit_outcome(
                request.name,
                request.payload,
                key=request.key,
                conflict=request.conflict,  # type: ignore[arg-type]
                queue=request.queue,
                priority=request.priority,
                delay_ms=request.delay_ms,
                max_attempts=request.max_attempts,
            )
        except AlreadyExists as exc:
            held = f"task {exc.task_id} ({exc.status})" if exc.task_id is not None else "a task"
            self._finish(
                f"Rejected (AlreadyExists): key {quoted(request.key)} already holds {held}; "
                "nothing written.",
                "warning",
                open_task=exc.task_id,
            )
            return
        task = outcome.task
        if outcome.action == "reused":
            self._finish(
                f"Reused the existing task {task.id} ({task.status}) "
                f"under key {quoted(request.key)}.",
                open_task=task.id,
            )
            return
        moved = f"; key {quoted(request.key)} now points at it" if request.key else ""
        if outcome.previous is not None and request.conflict == "replace":
            moved += f" (was {outcome.previous.id})"
        self._finish(
            f"Submitted new task {task.id}{moved}.",
            open_task=task.id,
            follow_key=request.key if request.conflict == "replace" else None,
        )

    # -- purge -------------------------------------------------------------------------------------

    def purge(self) -> None:
        """Open the purge dialog; its preview counts before anything is deleted."""
        if not self._allowed():
            return
        self.app.push_screen(
            PurgeScreen(self.app.inspector, self.app.known_queues), self._confirm_purge
        )

    def _confirm_purge(self, request: PurgeRequest | None) -> None:
        if request is None:
            return
        lines = [
            f"{request.preview} terminal task(s) completed more than "
            f"{duration(request.older_than_ms)} ago ({request.describe()}).",
            "They are deleted for good, with the keys that point at them.",
        ]
        self._confirm(
            f"Purge {request.preview} task(s)?",
            lines,
            lambda _: self._run(lambda: self._purge(request), "purge"),
            confirm_label="Purge",
        )

    async def _purge(self, request: PurgeRequest) -> None:
        total = 0
        while True:
            batch = await self.app.client.purge(
                older_than_ms=request.older_than_ms,
                queue=request.queue,
                status=request.status,
                name=request.name,
                limit=1_000,
            )
            total += len(batch)
            if len(batch) < 1_000:
                break
        self._finish(f"Purged {total:,} task(s).")
