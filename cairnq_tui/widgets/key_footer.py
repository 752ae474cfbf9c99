"""The footer: the keys of the focused widget's binding chain, as one widget.

Textual's ``Footer`` is a container of one widget per key (about 25 here), and
it recomposes them all on every binding change, which Textual signals on every
focus change: a view switch built and mounted 25 widgets, with their styles,
between the keypress and the repaint, and left the old ones to the cyclic
garbage collector. ``KeyFooter`` is one widget that renders the bindings as
one line of text. When bindings are signalled it recomputes what it would
show (key, label, enabled) and repaints only if that changed; a view switch
among views with the same keys costs a dictionary walk.

It looks like ``Footer`` (same theme colours, key then label, the command
palette key on the right) and acts like it: clicking a key presses it (a
disabled key rings the bell), hovering highlights it.
"""

from __future__ import annotations

from typing import ClassVar, NamedTuple

from rich.cells import cell_len
from rich.style import Style
from rich.text import Text
from textual import events
from textual.screen import Screen
from textual.widget import Widget


class FooterKey(NamedTuple):
    """One key as the footer shows it."""

    key: str
    display: str
    description: str
    enabled: bool


def drawn_width(item: FooterKey) -> int:
    """The cells ``item`` takes in the footer: `` key description ``."""
    return cell_len(f" {item.display} {item.description} ")


class KeyFooter(Widget, can_focus=False):
    """The bindings of the focused chain in one line; repainted only when they change."""

    ALLOW_SELECT = False
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "key-footer--key",
        "key-footer--description",
        "key-footer--hover",
        "key-footer--separator",
    }
    DEFAULT_CSS = """
    KeyFooter {
        dock: bottom;
        height: 1;
        color: $footer-foreground;
        background: $footer-background;
        & > .key-footer--key {
            color: $footer-key-foreground;
            background: $footer-key-background;
            text-style: bold;
        }
        & > .key-footer--description {
            color: $footer-description-foreground;
            background: $footer-description-background;
        }
        & > .key-footer--hover {
            background: $block-hover-background;
        }
        & > .key-footer--separator {
            color: $foreground 20%;
        }
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        #: What is shown: the keys left to right, then the command palette key (or None).
        self.keys: tuple[FooterKey, ...] = ()
        self.palette: FooterKey | None = None
        #: (first cell, end cell, key) of each key drawn, for clicks and hover.
        self._spans: list[tuple[int, int, FooterKey]] = []
        self._hover: str | None = None
        #: How many times the shown keys changed (what a repaint was asked for).
        self.changes = 0

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)
        self._bindings_changed(self.screen)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def _bindings_changed(self, screen: Screen[object]) -> None:
        if not self.is_attached or screen is not self.screen:
            return
        keys, palette = self._collect(screen)
        if keys != self.keys or palette != self.palette:
            self.keys, self.palette = keys, palette
            self.changes += 1
            self.refresh()

    def _collect(self, screen: Screen[object]) -> tuple[tuple[FooterKey, ...], FooterKey | None]:
        """The keys to show, one per action in binding-chain order, as ``Footer`` picks them."""
        app = self.app
        shown: dict[str, FooterKey] = {}
        palette: FooterKey | None = None
        active = screen.active_bindings
        for _namespace, binding, enabled, _tooltip in active.values():
            if binding.show and binding.action not in shown:
                shown[binding.action] = FooterKey(
                    binding.key, app.get_key_display(binding), binding.description, enabled
                )
        if app.ENABLE_COMMAND_PALETTE:
            found = active.get(app.COMMAND_PALETTE_BINDING)
            if found is not None:
                binding = found.binding
                palette = FooterKey(
                    binding.key, app.get_key_display(binding), binding.description, found.enabled
                )
                shown.pop(binding.action, None)
        return tuple(shown.values()), palette

    def render(self) -> Text:
        key_style = self.get_component_rich_style("key-footer--key", partial=True)
        description_style = self.get_component_rich_style("key-footer--description", partial=True)
        hover_style = self.get_component_rich_style("key-footer--hover", partial=True)
        separator_style = self.get_component_rich_style("key-footer--separator", partial=True)
        dim = Style(dim=True)
        text = Text(no_wrap=True, overflow="crop", end="")
        spans: list[tuple[int, int, FooterKey]] = []

        def add(item: FooterKey) -> None:
            start = text.cell_len
            extra = (hover_style if item.key == self._hover else Style()) + (
                Style() if item.enabled else dim
            )
            text.append(f" {item.display} ", key_style + extra)
            text.append(f"{item.description} ", description_style + extra)
            spans.append((start, text.cell_len, item))

        # The palette key keeps its place at the right edge, after a separator; the
        # other keys fill what is left, each whole or not at all (a key that does not
        # fit is still pressed by its key, and listed in help and the palette).
        palette = self.palette
        room = self.size.width
        if palette is not None:
            room -= drawn_width(palette) + 1
        for item in self.keys:
            if text.cell_len + drawn_width(item) > room:
                break
            add(item)
        if palette is not None:
            text.append(" " * max(room - text.cell_len, 0))
            text.append("▏", separator_style)
            add(palette)
        self._spans = spans
        return text

    def key_at(self, x: int) -> FooterKey | None:
        """The key drawn at cell ``x`` (None between keys)."""
        for start, end, item in self._spans:
            if start <= x < end:
                return item
        return None

    def on_mouse_down(self, event: events.MouseDown) -> None:
        item = self.key_at(event.x)
        if item is None:
            return
        event.stop()
        if item.enabled:
            self.app.simulate_key(item.key)
        else:
            self.app.bell()

    def on_mouse_move(self, event: events.MouseMove) -> None:
        item = self.key_at(event.x)
        self._set_hover(item.key if item is not None else None)

    def on_leave(self, event: events.Leave) -> None:
        self._set_hover(None)

    def _set_hover(self, key: str | None) -> None:
        if key != self._hover:
            self._hover = key
            self.refresh()
