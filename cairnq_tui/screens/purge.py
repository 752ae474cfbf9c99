"""The purge dialog: cutoff and filters, with a live (capped) count of what would go."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Select, Static

from cairnq_tui import keymap
from cairnq_tui.actions import TERMINAL
from cairnq_tui.formatting import quoted
from cairnq_tui.widgets.field import Field
from cairnq_tui.widgets.key_footer import KeyFooter
from cairnq_tui.widgets.view_bases import ConsoleNode
from engine.inspection import CappedCount, Inspector, parse_duration


@dataclass(frozen=True)
class PurgeRequest:
    """What to purge, and the preview count the operator saw."""

    older_than_ms: int
    queue: str | None
    status: str | None
    name: str | None
    preview: CappedCount

    def describe(self) -> str:
        parts = [
            f"{k}={quoted(v)}"
            for k, v in (("status", self.status), ("queue", self.queue), ("name", self.name))
            if v
        ]
        return ", ".join(parts) or "any terminal status, every queue and name"


class PurgeScreen(ConsoleNode, ModalScreen[PurgeRequest | None]):
    """Returns a ``PurgeRequest`` (with its preview) or None."""

    BINDINGS = keymap.DIALOG

    def __init__(self, inspector: Inspector, queues: list[str]) -> None:
        super().__init__()
        self.inspector = inspector
        self.queues = queues
        self._request: PurgeRequest | None = None

    def compose(self) -> ComposeResult:
        yield KeyFooter()  # the keys of this dialog, not of the screen under it
        with Vertical(classes="dialog"):
            yield Label(Text("Purge terminal tasks", style="bold"), classes="dialog-title")
            with Horizontal(classes="row"):
                yield Field(
                    "Completed more than … ago",
                    Input("7d", placeholder="e.g. 1h, 7d (0 = any age)", id="older"),
                )
                yield Field(
                    "Status",
                    Select([(s, s) for s in TERMINAL], prompt="any terminal status", id="status"),
                )
            with Horizontal(classes="row"):
                yield Field(
                    "Queue", Select([(q, q) for q in self.queues], prompt="any queue", id="queue")
                )
                yield Field("Name", Input(placeholder="any name", id="name"))
            yield Static("", id="preview")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Purge…", variant="error", id="purge", disabled=True)
                yield Button("Back", id="back")

    def on_mount(self) -> None:
        self.query_one("#older", Input).focus()
        self.update_preview()

    def on_input_changed(self, event: Input.Changed) -> None:
        self.update_preview()

    def on_select_changed(self, event: Select.Changed) -> None:
        self.update_preview()

    def _value(self, widget_id: str) -> str | None:
        value = self.query_one(f"#{widget_id}", Select).value
        return value if isinstance(value, str) else None

    @dataclass
    class Previewed(Message):
        """The count for the cutoff and filters the dialog showed when it was asked."""

        request: PurgeRequest | None
        problem: str | None = None

    def update_preview(self) -> None:
        text = self.query_one("#older", Input).value
        if not text.strip():
            self.post_message(
                self.Previewed(None, "Give a cutoff: e.g. 7d; 0 means every terminal task.")
            )
            return
        try:
            older = parse_duration(text, zero=True)
        except ValueError as exc:
            self.post_message(self.Previewed(None, str(exc)))
            return
        name = self.query_one("#name", Input).value.strip() or None
        self.count(older, self._value("queue"), self._value("status"), name)

    @work(exclusive=True, group="purge-preview", exit_on_error=False)
    async def count(
        self, older: int, queue: str | None, status: str | None, name: str | None
    ) -> None:
        found = await self.inspector.count_purgeable(
            older_than_ms=older, queue=queue, status=status, name=name
        )
        self.post_message(self.Previewed(PurgeRequest(older, queue, status, name, found)))

    def on_purge_screen_previewed(self, message: Previewed) -> None:
        preview = self.query_one("#preview", Static)
        button = self.query_one("#purge", Button)
        self._request = message.request
        if message.request is None:
            preview.update(Text(message.problem or "", style="red"))
            button.disabled = True
            return
        every = " (any age: the cutoff is 0)" if message.request.older_than_ms == 0 else ""
        preview.update(
            Text(f"Would delete {message.request.preview} task(s){every}.", style="bold")
        )
        button.disabled = message.request.preview.value == 0

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "purge" and self._request is not None:
            self.dismiss(self._request)
        else:
            self.dismiss(None)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
