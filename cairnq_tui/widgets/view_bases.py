"""The bases of the console's views and screens.

``ConsoleNode`` (every view and screen of the console): typed access to the
app (``self.console``, a ``Console``), and failed workers forwarded to the app.
Textual posts ``Worker.StateChanged`` to the node that ran the worker and does
not bubble it, so every node forwards it to ``ConsoleApp.on_worker_state_changed``,
the one place a failure becomes a notification (and a refresh is re-armed).

``DataNode`` (every data view, and the task detail) adds control keys that are
off in a read-only session, and the refresh: the app calls ``refresh_data``; a
worker measures the node's database reads and posts their result as a
``DataMessage`` carrying its cost; the node's handler takes the result in and
calls ``drawn``, which draws it and tells the app, so the next tick is armed.
``DataView`` is a ``DataNode`` laid out as a vertical stack: the base of the
tabs' views.

The two are plain mixins, listed before the Textual class (``class
TaskDetailScreen(DataNode, Screen[None])``): Textual reads a class's default CSS
along its first base that is a Textual node, so a mixin that was one would hide
``Vertical``'s and ``Widget``'s styles from every view.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from textual import work
from textual.containers import Vertical
from textual.message import Message
from textual.worker import Worker as TextualWorker

from cairnq_tui import keymap
from cairnq_tui.messages import DataMessage
from cairnq_tui.ports import Console, console_of

if TYPE_CHECKING:
    from textual.app import App


class ConsoleNode:
    """Mixin (before the Textual class) of the console's views and screens."""

    if TYPE_CHECKING:  # what the Textual class it is mixed into provides
        app: App[object]

        def post_message(self, message: Message) -> bool: ...

    @property
    def console(self) -> Console:
        """The console app, typed."""
        return console_of(self.app)

    def on_worker_state_changed(self, event: TextualWorker.StateChanged) -> None:
        self.console.on_worker_state_changed(event)


class DataNode(ConsoleNode):
    """A node the app refreshes: read in a worker, measured, posted, drawn."""

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if self.console.read_only and action in keymap.CONTROL_ACTIONS:
            return None  # shown dimmed in the footer, does nothing
        return True

    def refresh_data(self) -> None:
        """Start a refresh (the app's loop calls this for the visible view)."""
        self.start_read(self.read)

    async def read(self) -> DataMessage:
        """Read what the node shows; the result's ``cost_ms`` is filled in by the caller."""
        raise NotImplementedError

    def start_read(self, read: Callable[[], Awaitable[DataMessage]]) -> None:
        """Run ``read`` in the node's refresh worker (a newer refresh cancels an older one)."""
        self._read(read)

    @work(exclusive=True, group="refresh", exit_on_error=False)
    async def _read(self, read: Callable[[], Awaitable[DataMessage]]) -> None:
        measure = self.console.measure
        started = measure()
        message = await read()
        message.cost_ms = (measure() - started) * 1000
        self.post_message(message)

    def drawn(self, message: DataMessage, *, draw: bool = True) -> None:
        """A handler took in ``message``: draw (unless ``draw`` is False: the handler drew,
        or the result was stale), then tell the app, which arms the next tick."""
        message.stop()
        if draw:
            self.draw()
        self.console.refresh_drawn(message)

    def draw(self) -> None:
        """Draw what the last refresh brought."""


class DataView(DataNode, Vertical):
    """Base of the views in the main screen's tabs."""
