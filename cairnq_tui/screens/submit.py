"""The submit dialog (also used, prefilled, to replace a keyed task).

The payload editor is validated as you type: invalid JSON or a NaN/Infinity
literal shows an inline error and the dialog cannot be confirmed, so nothing is
written. A new task's payload editor starts empty, which means ``{}`` (its
placeholder says so): typing a payload replaces nothing. The name and queue
complete from what the console knows when the form opens, then from a fresh
read of the database's names and queues and those the hosted workers handle.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual import events, work
from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.screen import ModalScreen
from textual.suggester import SuggestFromList
from textual.widgets import Button, Input, Label, Select, Static, TextArea

from cairnq_tui import keymap
from cairnq_tui.formatting import quoted
from cairnq_tui.ports import console_of
from cairnq_tui.screens.reused import StyledOnce
from cairnq_tui.widgets.field import Field
from cairnq_tui.widgets.key_footer import KeyFooter
from engine import CONFLICTS
from engine.inspection import parse_duration


@dataclass(frozen=True)
class SubmitRequest:
    """A validated submit, ready for ``CairnQ.submit``."""

    name: str
    payload: Any
    key: str | None = None
    conflict: str = "reuse"
    queue: str = "default"
    priority: int = 0
    delay_ms: int = 0
    max_attempts: int = 3
    #: For a replace: the task being replaced and its status.
    replacing: str | None = None
    replacing_status: str | None = None

    def payload_preview(self, limit: int = 200) -> str:
        text = json.dumps(self.payload, ensure_ascii=False)
        return text if len(text) <= limit else text[: limit - 1] + "…"


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON (NaN and Infinity are refused)")


def parse_payload(text: str) -> Any:
    """The payload editor's text as a JSON value.

    Raises:
        ValueError: not JSON, or NaN/Infinity anywhere in it.
    """
    if not text.strip():
        return {}
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from None


def _int(text: str, what: str, minimum: int | None = None) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise ValueError(f"{what} must be a whole number") from None
    if minimum is not None and value < minimum:
        raise ValueError(f"{what} must be >= {minimum}")
    return value


class SubmitScreen(StyledOnce, ModalScreen[SubmitRequest | None]):
    """Fields for every submit option; returns a ``SubmitRequest`` or None.

    Built once per console and reused (``reopen``): composing and styling its
    widgets was most of the time between ``n`` and the form on screen. Every
    open fills every field, the payload editor's text and edit history, the
    errors, the focus and the scroll position anew, so a reopened form is the
    same as a new one.
    """

    BINDINGS = keymap.SUBMIT

    def __init__(
        self,
        *,
        names: list[str],
        queues: list[str],
        prefill: SubmitRequest | None = None,
    ) -> None:
        super().__init__()
        self.names: list[str] = []
        self.queues: list[str] = []
        self.prefill = SubmitRequest(name="", payload={})
        #: True once the fresh read of names and queues is in the fields.
        self.completions_read = False
        self.reopen(names=names, queues=queues, prefill=prefill)

    def reopen(
        self,
        *,
        names: list[str],
        queues: list[str],
        prefill: SubmitRequest | None = None,
    ) -> None:
        """Make the form a fresh one for this open: ``prefill``'s values (a replace), else blank."""
        self.names = list(names)
        self.queues = list(queues)
        self.prefill = prefill or SubmitRequest(name="", payload={})
        self.completions_read = False
        if self.is_mounted:
            self._fill()

    def compose(self) -> ComposeResult:
        # The fields are composed empty; ``_fill`` gives them this open's values.
        with VerticalScroll(classes="dialog submit"):
            yield Label("", classes="dialog-title")
            yield Field(
                "Task name (tab completes a known name)",
                Input(placeholder="e.g. send_email", id="name"),
            )
            yield Label("Payload (JSON; empty means {})")
            yield TextArea("", id="payload", placeholder="{}")
            yield Static("", id="payload-error", classes="error")
            with Horizontal(classes="row"):
                yield Field("Key (optional)", Input(placeholder="none", id="key"))
                yield Field(
                    "If the key holds a task",
                    Select(
                        [(c, c) for c in CONFLICTS],
                        value="reuse",
                        allow_blank=False,
                        id="conflict",
                    ),
                )
            with Horizontal(classes="row"):
                yield Field("Queue", Input(placeholder="default", id="queue"))
                yield Field("Priority", Input(placeholder="0", id="priority"))
                yield Field("Delay (e.g. 30s)", Input(placeholder="0", id="delay"))
                yield Field("Max attempts", Input(placeholder="3", id="max_attempts"))
            yield Static("", id="form-error", classes="error")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Submit…", variant="primary", id="submit")
                yield Button("Back", id="back")
        yield KeyFooter()

    def on_mount(self) -> None:
        self._fill()

    def on_screen_resume(self, event: events.ScreenResume) -> None:
        # (``event`` is for StyledOnce's handler, which Textual calls after this one.)
        self.read_completions()

    def _fill(self) -> None:
        """Every field from ``self.prefill``, as a newly composed form would have it."""
        p = self.prefill
        title = f"Replace {p.replacing} (key {quoted(p.key)})" if p.replacing else "Submit a task"
        self.query_one(".dialog-title", Label).update(Text(title, style="bold"))
        values = {
            "name": p.name,
            "key": p.key or "",
            "queue": p.queue,
            "priority": str(p.priority),
            "delay": f"{p.delay_ms / 1000:g}s" if p.delay_ms else "0",
            "max_attempts": str(p.max_attempts),
        }
        for field, value in values.items():
            widget = self.query_one(f"#{field}", Input)
            widget.value = value
            widget.cursor_position = len(value)
        self.query_one("#key", Input).disabled = bool(p.replacing)
        conflict = self.query_one("#conflict", Select)
        conflict.value = p.conflict
        conflict.disabled = bool(p.replacing)
        self._suggest()
        # A new task's editor starts empty, not "{}": typing there gave `{...}{}`.
        text = "" if p.payload == {} else json.dumps(p.payload, indent=2, ensure_ascii=False)
        editor = self.query_one("#payload", TextArea)
        editor.load_text(text)  # (and forgets the last open's undo history)
        editor.move_cursor((0, 0))
        editor.scroll_home(animate=False)
        self.query_one(VerticalScroll).scroll_home(animate=False)
        self.query_one("#name", Input).focus()
        self.validate()

    def _suggest(self) -> None:
        self.query_one("#name", Input).suggester = SuggestFromList(self.names, case_sensitive=True)
        self.query_one("#queue", Input).suggester = SuggestFromList(
            self.queues, case_sensitive=True
        )

    @work(group="completions", exclusive=True, exit_on_error=False)
    async def read_completions(self) -> None:
        """Names and queues as they are now (tasks submitted since connect, hosted workers)."""
        names, queues = await console_of(self.app).read_completions()
        self.learn(names, queues)

    def learn(self, names: list[str], queues: list[str]) -> None:
        """Complete from ``names`` and ``queues`` too."""
        self.names = sorted({*self.names, *names})
        self.queues = sorted({*self.queues, *queues})
        self._suggest()
        self.completions_read = True

    def on_key(self, event: events.Key) -> None:
        # Tab in the name or queue field completes a known one, then always moves on.
        # The completion is worked out here, not taken from the Input's suggestion
        # (computed in a worker, so a quick Tab could arrive before it): a name
        # typed in full stays as typed even if a longer known name starts with it.
        if event.key != "tab" or not isinstance(self.focused, Input):
            return
        field = self.focused
        known = {"name": self.names, "queue": self.queues}.get(field.id or "")
        if known is None:
            return
        event.stop()
        event.prevent_default()
        typed = field.value
        if typed and typed not in known:
            longer = [n for n in known if n.startswith(typed)]
            if longer:
                field.value = longer[0]
        self.focus_next()

    def on_text_area_changed(self, event: TextArea.Changed) -> None:
        self.validate()

    def on_input_changed(self, event: Input.Changed) -> None:
        self.validate()

    def on_select_changed(self, event: Select.Changed) -> None:
        self.validate()

    def validate(self) -> SubmitRequest | None:
        """Check every field; show the first problem inline. The request, or None."""
        payload_error = self.query_one("#payload-error", Static)
        form_error = self.query_one("#form-error", Static)
        button = self.query_one("#submit", Button)
        try:
            payload = parse_payload(self.query_one("#payload", TextArea).text)
            payload_error.update("")
        except ValueError as exc:
            payload_error.update(Text(str(exc)))
            button.disabled = True
            return None
        try:
            request = self._request(payload)
            form_error.update("")
        except ValueError as exc:
            form_error.update(Text(str(exc)))
            button.disabled = True
            return None
        button.disabled = False
        return request

    def _request(self, payload: Any) -> SubmitRequest:
        def text(field: str) -> str:
            return self.query_one(f"#{field}", Input).value

        name = text("name").strip()
        if not name:
            raise ValueError("a task name is required")
        queue = text("queue").strip() or "default"
        conflict = self.query_one("#conflict", Select).value
        return SubmitRequest(
            name=name,
            payload=payload,
            key=text("key").strip() or None,
            conflict=str(conflict),
            queue=queue,
            priority=_int(text("priority"), "priority"),
            delay_ms=parse_duration(text("delay") or "0", zero=True),
            max_attempts=_int(text("max_attempts"), "max attempts", minimum=1),
            replacing=self.prefill.replacing,
            replacing_status=self.prefill.replacing_status,
        )

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "submit":
            self.action_submit()
        else:
            self.dismiss(None)

    def action_submit(self) -> None:
        request = self.validate()
        if request is not None:
            self.dismiss(request)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
