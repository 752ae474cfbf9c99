"""What the controls use of the console app, as a protocol (``ConsoleApp`` implements it)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from textual.timer import Timer

from cairnq_tui.ports import AppCalls
from cairnq_tui.settings import Settings
from engine import CairnQ
from engine.inspection import Inspector


class ControlHost(AppCalls, Protocol):
    """What the controls use of the console app (``ConsoleApp`` implements it)."""

    client: CairnQ
    inspector: Inspector
    settings: Settings
    read_only: bool
    names: list[str]
    known_queues: list[str]

    def set_timer(
        self, delay: float, callback: Callable[[], Any] | None = None, *, name: str | None = None
    ) -> Timer: ...

    def call_later(self, callback: Callable[..., object], *args: Any, **kwargs: Any) -> bool: ...

    def post_message(self, message: Any) -> bool: ...
