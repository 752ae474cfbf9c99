"""Screens the console builds once and shows again: no whole restyle per open.

Textual's ``push_screen`` sends ``ScreenResume`` with ``refresh_styles`` set,
and the resumed screen then applies the stylesheet again to every one of its
nodes and their component classes. For a screen composed anew that is what
styles it; for one the console installed and shows again (the submit form, the
task detail, help) it repeats the styling the screen already has: ~20 ms of
the submit form's ~40 ms open (39 nodes: Inputs, Select, TextArea), about half
of the task detail's and help's.

What a whole restyle would change is only what changed while the screen was
not shown and was not restyled then: the theme, the ANSI colour mode, and the
terminal's focus (``App.app_focus``, the ``:focus`` state of the app), which
Textual restyles on the screens in the stack only. ``StyledOnce`` keeps the
restyle when one of them changed since the screen's last resume and skips it
otherwise. Everything a reopen changes inside the screen (values, disabled
fields, focus, classes) restyles the widgets it touches as it always does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import events

if TYPE_CHECKING:
    from textual.app import App


class StyledOnce:
    """Mixin (before the Textual ``Screen`` class) of a screen installed and shown again."""

    if TYPE_CHECKING:  # what the Textual class it is mixed into provides
        app: App[object]

    #: What the screen was last styled for (see ``_styled_for``); None before its first show.
    _styled_as: tuple[object, ...] | None = None

    def _styled_for(self) -> tuple[object, ...]:
        app = self.app
        return (app.theme, app.ansi_color, app.app_focus)

    def on_screen_resume(self, event: events.ScreenResume) -> None:
        # Textual's own handler (``Screen``'s, after this one in the MRO) reads the flag.
        now = self._styled_for()
        if now == self._styled_as:
            event.refresh_styles = False
        self._styled_as = now
