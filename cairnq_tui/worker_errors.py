"""Failed workers of views and screens reach the app's one error handler.

Textual posts ``Worker.StateChanged`` to the widget that ran the worker and does
not bubble it, so every view forwards it to ``ConsoleApp.on_worker_state_changed``,
the one place a failure becomes a notification (and a refresh is re-armed).
"""

from __future__ import annotations

from typing import Any

from textual.worker import Worker as TextualWorker


class ForwardWorkerErrors:
    """Mixin for widgets and screens that run database workers."""

    app: Any

    def on_worker_state_changed(self, event: TextualWorker.StateChanged) -> None:
        self.app.on_worker_state_changed(event)
