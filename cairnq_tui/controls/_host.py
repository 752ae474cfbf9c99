"""What the controls use of the console app, as a protocol (``ConsoleApp`` implements it)."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, Protocol, TypeVar

from textual.notifications import SeverityLevel
from textual.screen import Screen, ScreenResultCallbackType
from textual.timer import Timer
from textual.worker import Worker as TextualWorker

from cairnq_tui.settings import Settings
from engine import CairnQ
from engine.inspection import Inspector

ResultT = TypeVar("ResultT")


class ControlHost(Protocol):
    """What the controls use of the console app (``ConsoleApp`` implements it)."""

    client: CairnQ
    inspector: Inspector
    settings: Settings
    read_only: bool
    names: list[str]
    known_queues: list[str]

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None: ...

    def push_screen(
        self,
        screen: Screen[ResultT],
        callback: ScreenResultCallbackType[ResultT] | None = None,
    ) -> object: ...

    def run_worker(
        self,
        work: Coroutine[Any, Any, ResultT],
        name: str | None = "",
        group: str = "default",
        description: str = "",
        exit_on_error: bool = True,
        start: bool = True,
        exclusive: bool = False,
        thread: bool = False,
    ) -> TextualWorker[ResultT]: ...

    def set_timer(
        self, delay: float, callback: Callable[[], Any] | None = None, *, name: str | None = None
    ) -> Timer: ...

    def call_later(self, callback: Callable[..., object], *args: Any, **kwargs: Any) -> bool: ...

    def post_message(self, message: Any) -> bool: ...
