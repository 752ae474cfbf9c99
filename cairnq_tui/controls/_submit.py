"""Submit and replace: the form, a confirmation of what will be written, the report.

A replace is a submit under the task's key with ``conflict="replace"``, its
payload prefilled; its confirmation names the task the key points at when it
is confirmed (looked up again then), not when the form opened.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from cairnq_tui.controls._write_path import WritePath
from cairnq_tui.formatting import clean, duration, quoted
from cairnq_tui.screens.submit import SubmitRequest, SubmitScreen
from engine import AlreadyExists, TaskRef
from engine.inspection import UndecodableJSON

#: The name the one submit form is installed under.
SUBMIT_SCREEN = "submit-form"


class SubmitControls(WritePath):
    """Submit and replace."""

    #: The submit form, built at the first open and reused.
    _form: SubmitScreen | None = None

    def submit(self, prefill: SubmitRequest | None = None) -> None:
        """Open the submit dialog (``prefill`` for a replace)."""
        if not self._allowed():
            return
        names, queues = self.app.names, self.app.known_queues
        # One form per console, reopened (every field reset) rather than built
        # anew: composing and styling it was most of an open's time. Installed,
        # it stays mounted when dismissed.
        form = self._form
        if form is None:
            form = self._form = SubmitScreen(names=names, queues=queues, prefill=prefill)
            self.app.install_screen(form, SUBMIT_SCREEN)
        elif form in self.app.screen_stack:
            return  # open already
        else:
            form.reopen(names=names, queues=queues, prefill=prefill)
        self.app.push_screen(form, self._confirm_submit)

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
            if isinstance(task.payload, UndecodableJSON):
                self._finish(
                    f"{task.id}'s payload cannot be decoded ({task.payload.reason}): "
                    "there is nothing to prefill; submit a new task under its key instead.",
                    "warning",
                )
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

        self._read(load, "lookup")

    def _confirm_submit(self, request: SubmitRequest | None) -> None:
        if request is None:
            return
        if request.key and request.conflict == "replace":
            # Confirm against the task the key points at now, not when the form opened.
            async def look_up() -> None:
                current = await self.app.client.get_status_by_key(str(request.key))
                self.app.call_later(self._show_submit_confirmation, request, current, True)

            self._read(look_up, "lookup")
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
        self.confirm_write(
            "Submit this task?",
            lines,
            lambda _: self._submit(request),
            what=f"submit {quoted(request.name)}"
            + (f" under key {quoted(request.key)}" if request.key else ""),
            confirm_label="Submit",
            verify=self._submitted_now(request),
            back=lambda: self.submit(request),  # back to the filled form
        )

    def _submitted_now(self, request: SubmitRequest) -> Callable[[], Awaitable[str]]:
        async def verify() -> str:
            if not request.key:
                return (
                    "a submit without a key cannot be looked up: see the Tasks view for a "
                    f"new task named {quoted(request.name)}."
                )
            held = await self.app.client.get_status_by_key(request.key)
            if held is None:
                return f"key {quoted(request.key)} points at no task."
            return f"key {quoted(request.key)} points at {held.id} ({held.status})."

        return verify

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
