"""The views that open on a screen of their own, offered in the command palette.

"Failures" (and the views of the history file) are not tabs: ctrl+p lists them
by name, and each opens over the main screen (``screens/panel.py``), escape
going back.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from textual.app import App
from textual.command import DiscoveryHit, Hit, Hits, Provider

from cairnq_tui.screens.main import MainScreen
from cairnq_tui.screens.panel import PanelScreen
from cairnq_tui.widgets.view_bases import DataView


def _failures() -> DataView:
    from cairnq_tui.widgets.failures_view import FailuresView

    return FailuresView(id="failures-view")


def _audit() -> DataView:
    from cairnq_tui.widgets.audit_view import AuditView

    return AuditView(id="audit-view")


def _metrics() -> DataView:
    from cairnq_tui.widgets.metrics_view import MetricsView

    return MetricsView(id="metrics-view")


def _workers() -> DataView:
    from cairnq_tui.widgets.workers_view import WorkersView

    return WorkersView(id="workers-view")


#: Palette title -> (help line, the view's factory).
PANELS: dict[str, tuple[str, Callable[[], DataView]]] = {
    "Failures": (
        "Failed tasks grouped by name and error, over 1 h / 24 h / 7 d / all",
        _failures,
    ),
    "Metrics": (
        "Completions, failures and latency per queue and name; queue depth over time",
        _metrics,
    ),
    "Workers": (
        "Worker ids holding leases now (from the rows) and seen before (the recorder)",
        _workers,
    ),
    "Audit": ("Every write this console made on this target (the history file)", _audit),
}


def open_panel(app: App[Any], title: str) -> None:
    """Open the view named ``title`` over the main screen."""
    _, factory = PANELS[title]
    app.push_screen(PanelScreen(factory(), title))


class PanelCommands(Provider):
    """The views on screens of their own, by name."""

    def _open(self, title: str) -> None:
        app = self.app
        while not isinstance(app.screen, MainScreen) and len(app.screen_stack) > 2:
            app.pop_screen()  # another panel or a detail: this one replaces them
        open_panel(app, title)

    async def discover(self) -> Hits:
        for title, (help_text, _) in PANELS.items():
            yield DiscoveryHit(title, partial(self._open, title), help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, (help_text, _) in PANELS.items():
            score = matcher.match(title)
            if score > 0:
                yield Hit(
                    score, matcher.highlight(title), partial(self._open, title), help=help_text
                )
