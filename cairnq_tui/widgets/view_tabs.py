"""The main screen's tab strip: every view's name in one widget.

Textual's ``TabbedContent`` draws its strip as about twenty widgets (a ``Tab``
per view, their containers, an ``Underline``): a view switch swapped classes on
two tabs and restyled them, and animated the underline to its new place over
0.3 s, a frame of the whole strip every ~16 ms after each switch. ``ViewTabs``
is one widget that renders the names on one line and the underline below them
(the active view's name underlined), with the same theme colours; a switch
sets ``active`` and repaints these two lines, with no animation.

Clicking a name posts ``ViewTabs.Clicked``; the screen shows that view as the
view's key would. Hovering a name highlights it.
"""

from __future__ import annotations

from typing import ClassVar

from rich.cells import cell_len
from rich.style import Style
from rich.text import Text
from textual import events
from textual.message import Message
from textual.reactive import reactive
from textual.widget import Widget

#: The underline's characters (those ``Tabs`` draws): the bar, and its halves on
#: either side of the highlighted part.
BAR, BAR_ENDS_LEFT_OF, BAR_STARTS_RIGHT_OF = "━", "╸", "╺"


class ViewTabs(Widget, can_focus=False):
    """The views' names on one line and an underline below, the active one highlighted."""

    ALLOW_SELECT = False
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "view-tabs--tab",
        "view-tabs--active",
        "view-tabs--hover",
        "view-tabs--bar",
        "view-tabs--bar-active",
    }
    DEFAULT_CSS = """
    ViewTabs {
        height: 2;
        width: 1fr;
        text-wrap: nowrap;  /* keep the first name's leading cell of padding */
        pointer: pointer;
        & > .view-tabs--tab {
            color: $foreground 50%;
        }
        & > .view-tabs--active {
            color: $foreground;
        }
        & > .view-tabs--hover {
            color: $foreground;
        }
        & > .view-tabs--bar {
            color: $foreground 10%;
        }
        & > .view-tabs--bar-active {
            color: $block-cursor-background;
        }
        &:ansi {
            & > .view-tabs--tab {
                text-style: dim;
            }
            & > .view-tabs--active {
                text-style: not dim bold;
            }
            & > .view-tabs--bar {
                color: $border-blurred;
            }
        }
    }
    """

    #: The name (id) of the view shown.
    active: reactive[str] = reactive("")

    class Clicked(Message):
        """A view's name was clicked."""

        def __init__(self, view: str) -> None:
            super().__init__()
            self.view = view

    def __init__(self, tabs: dict[str, str], *, active: str, id: str | None = None) -> None:
        """``tabs``: each view's name and the label shown for it, left to right."""
        super().__init__(id=id)
        self.tabs = dict(tabs)
        self.set_reactive(ViewTabs.active, active)
        self._hover: str | None = None
        #: (first cell, end cell, view) of each name drawn, for clicks and hover.
        self._spans: list[tuple[int, int, str]] = []
        x = 0
        for view, label in self.tabs.items():
            width = cell_len(label) + 2  # a cell of padding either side, as Tab has
            self._spans.append((x, x + width, view))
            x += width

    def render(self) -> Text:
        tab = self.get_component_rich_style("view-tabs--tab")
        active = self.get_component_rich_style("view-tabs--active")
        hover = self.get_component_rich_style("view-tabs--hover")
        bar = Style(color=self.get_component_rich_style("view-tabs--bar").color)
        bar_active = Style(color=self.get_component_rich_style("view-tabs--bar-active").color)
        text = Text(no_wrap=True, overflow="crop", end="")
        for _start, _end, view in self._spans:
            style = active if view == self.active else hover if view == self._hover else tab
            text.append(f" {self.tabs[view]} ", style)
        text.append("\n")
        width = self.size.width
        start, end = self.span_of(self.active)
        if end <= start:  # no such view: nothing underlined
            text.append(BAR * width, bar)
            return text
        start, end = min(start + 1, width), min(end - 1, width)  # the name, not its padding
        before, after = BAR * start, BAR * (width - end)
        if before:
            before = before[:-1] + BAR_ENDS_LEFT_OF
        if after:
            after = BAR_STARTS_RIGHT_OF + after[1:]
        text.append(before, bar)
        text.append(BAR * (end - start), bar_active)
        text.append(after, bar)
        return text

    def span_of(self, view: str) -> tuple[int, int]:
        """The first and end cell of ``view``'s name ((0, 0) for no such view)."""
        for start, end, name in self._spans:
            if name == view:
                return start, end
        return 0, 0

    def view_at(self, x: int) -> str | None:
        """The view whose name is drawn at cell ``x`` (None past the last)."""
        for start, end, view in self._spans:
            if start <= x < end:
                return view
        return None

    def on_click(self, event: events.Click) -> None:
        view = self.view_at(event.x)
        if view is not None:
            event.stop()
            self.post_message(self.Clicked(view))

    def on_mouse_move(self, event: events.MouseMove) -> None:
        self._set_hover(self.view_at(event.x))

    def on_leave(self, event: events.Leave) -> None:
        self._set_hover(None)

    def _set_hover(self, view: str | None) -> None:
        if view != self._hover:
            self._hover = view
            self.refresh()
