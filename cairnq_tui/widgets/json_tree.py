"""A collapsible JSON tree whose large parts load only when opened.

Containers show their first ``PAGE`` children; a "… N more" node loads the next
page when selected. Long strings are cut, and selecting one shows it whole.
Every key and value is shown literally (``safe_text``). A column the engine
could not decode (``UndecodableJSON``: nested deeper than it reads, or not JSON)
shows a note with the reason and the start of its raw text, escaped.
"""

from __future__ import annotations

import json
from typing import Any

from rich.text import Text
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from cairnq_tui.formatting import clean
from engine.inspection import UndecodableJSON

PAGE = 100
SHORT = 120
#: How much of an undecodable column's raw text is shown.
RAW_SHOWN = 300


class _More:
    """A placeholder for the children of ``container`` from ``start`` on."""

    def __init__(self, container: Any, start: int) -> None:
        self.container = container
        self.start = start


class _LongString:
    def __init__(self, label: str, value: str) -> None:
        self.label = label
        self.value = value


def _scalar(value: Any) -> Text:
    if isinstance(value, str):
        # Quoted by hand: json.dumps would escape the backslash of clean's escapes again.
        return Text(f'"{clean(value)}"', style="green")
    if value is None or isinstance(value, bool):
        return Text(json.dumps(value), style="magenta")
    return Text(json.dumps(value), style="cyan")


def _summary(value: Any) -> str:
    if isinstance(value, dict):
        return f"{{…}} {len(value)} keys"
    return f"[…] {len(value)} items"


class JsonTree(Tree[Any]):
    """``show(value)`` renders a JSON value; the tree is rebuilt only when it changes."""

    DEFAULT_CSS = """
    JsonTree { height: 1; }
    """
    #: The most lines the tree takes before it scrolls.
    MAX_LINES = 20

    def __init__(self, label: str, **kwargs: Any) -> None:
        super().__init__(Text(label), **kwargs)
        self._value: Any = object()
        self.show_root = False
        self.guide_depth = 3

    def blank(self) -> None:
        """Show nothing, as when new (the next ``show`` builds the tree whatever its value)."""
        self._value = object()
        self.clear()
        self.call_after_refresh(self._fit)

    def show(self, value: Any) -> None:
        """Display ``value`` (JSON-decoded); nothing happens if it did not change."""
        if value == self._value and type(value) is type(self._value):
            return
        self._value = value
        self.clear()
        if isinstance(value, UndecodableJSON):
            self._add_undecodable(value)
        elif isinstance(value, dict | list):
            self._add_json_children(self.root, value, 0)
            self.root.expand()
        else:
            self.root.add_leaf(_scalar(value))
        self.root.expand()
        self.call_after_refresh(self._fit)

    def _add_undecodable(self, value: UndecodableJSON) -> None:
        self.root.add_leaf(
            Text(
                f"cannot be decoded ({clean(value.reason)}): raw text as stored, "
                f"{len(value.text):,} chars"
                + (f", the first {RAW_SHOWN} shown" if len(value.text) > RAW_SHOWN else ""),
                style="bold yellow",
            )
        )
        raw = clean(value.text[:RAW_SHOWN]) + ("…" if len(value.text) > RAW_SHOWN else "")
        self.root.add_leaf(Text(raw, style="dim"))

    def _fit(self) -> None:
        # A Tree scrolls inside whatever height it gets: size it to its lines.
        self.styles.height = min(self.MAX_LINES, max(1, self.last_line + 1))

    def on_tree_node_expanded(self, event: Tree.NodeExpanded[Any]) -> None:
        self.call_after_refresh(self._fit)

    def on_tree_node_collapsed(self, event: Tree.NodeCollapsed[Any]) -> None:
        self.call_after_refresh(self._fit)

    def _add_json_children(self, node: TreeNode[Any], container: Any, start: int) -> None:
        items = (
            list(container.items()) if isinstance(container, dict) else list(enumerate(container))
        )
        for label, child in items[start : start + PAGE]:
            name = clean(label) if isinstance(container, dict) else f"[{label}]"
            self._add(node, name, child)
        if len(items) > start + PAGE:
            rest = len(items) - start - PAGE
            node.add_leaf(
                Text(f"… {rest} more (select to load)", style="dim italic"),
                _More(container, start + PAGE),
            )

    def _add(self, node: TreeNode[Any], name: str, value: Any) -> None:
        key = Text(name, style="bold")
        if isinstance(value, dict | list):
            branch = node.add(Text.assemble(key, "  ", (_summary(value), "dim")), value)
            self._add_json_children(branch, value, 0)
            if len(value) <= 8:
                branch.expand()
        elif isinstance(value, str) and len(value) > SHORT:
            short = Text.assemble(
                key, ": ", _scalar(value[:SHORT]), (f" … {len(value)} chars", "dim")
            )
            node.add_leaf(short, _LongString(name, value))
        else:
            node.add_leaf(Text.assemble(key, ": ", _scalar(value)))

    def on_tree_node_selected(self, event: Tree.NodeSelected[Any]) -> None:
        data = event.node.data
        if isinstance(data, _More):
            parent = event.node.parent
            event.node.remove()
            if parent is not None:
                self._add_json_children(parent, data.container, data.start)
        elif isinstance(data, _LongString):
            event.node.set_label(
                Text.assemble(Text(data.label, style="bold"), ": ", _scalar(data.value))
            )
