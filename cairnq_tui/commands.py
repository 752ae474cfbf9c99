"""The command palette (ctrl+p): every view and every action, searchable by name.

Entries come from the keymap, so the palette offers exactly what the keys do;
an action that belongs to a view switches to that view first. Controls are left
out in read-only mode.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from textual.command import DiscoveryHit, Hit, Hits, Provider

from cairnq_tui import keymap
from cairnq_tui.ports import console_of
from cairnq_tui.screens.main import MainScreen

#: keymap section → the view its actions run in (None: the app itself).
_SECTION_VIEWS = {
    "Everywhere": None,
    "Tasks view": "tasks",
    "Queues view": "queues",
    "Leases view": "leases",
    "Keys view": "keys",
    "Hosted worker views (Waits, Quotas, Resources, Calls, Errors)": "quotas",
    "Errors view": "errors",
}
_EXTRA = [
    ("Cancel by key…", "Cancel the task a key points at", None, "cancel_by_key_prompt"),
    ("Retry by key…", "Retry the task a key points at", None, "retry_by_key_prompt"),
]


class ConsoleCommands(Provider):
    """Views and actions of the console."""

    def _commands(self) -> list[tuple[str, str, Callable[[], Any]]]:
        console = console_of(self.app)
        out: list[tuple[str, str, Callable[[], Any]]] = []
        for section, bindings in keymap.SECTIONS:
            if section not in _SECTION_VIEWS:
                continue
            view = _SECTION_VIEWS[section]
            for binding in bindings:
                action = binding.action.split("(")[0]
                if console.read_only and action in keymap.CONTROL_ACTIONS:
                    continue
                if action == "quit":
                    continue  # Textual's own "Quit" is in the palette already
                if action in {"quit", "help"} and view is None:
                    title = binding.description
                elif action == "show_view":
                    title = f"Show the {binding.description} view"
                else:
                    title = f"{binding.description}" + (f" ({section})" if view else "")
                out.append(
                    (
                        title,
                        f"key: {binding.key_display or binding.key}",
                        partial(self._run, view, binding.action),
                    )
                )
        if not console.read_only:
            for title, help_text, view, action in _EXTRA:
                out.append((title, help_text, partial(self._run, view, action)))
        return out

    async def _run(self, view: str | None, action: str) -> None:
        app = self.app
        if view is None:
            await app.run_action(action)
            return
        console_of(app).action_show_view(view)
        main = app.screen
        namespace = main.active_view() if isinstance(main, MainScreen) else None
        await app.run_action(action, default_namespace=namespace)

    async def discover(self) -> Hits:
        for title, help_text, callback in self._commands():
            yield DiscoveryHit(title, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, help_text, callback in self._commands():
            score = matcher.match(title)
            if score > 0:
                yield Hit(score, matcher.highlight(title), callback, help=help_text)
