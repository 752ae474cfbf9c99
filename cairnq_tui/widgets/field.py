"""A form field: a visible label above its input, so no field relies on a placeholder
(which disappears as soon as something is typed or prefilled)."""

from __future__ import annotations

from textual.containers import Vertical
from textual.widget import Widget
from textual.widgets import Label


class Field(Vertical):
    """``label`` over ``widget``; sized by its row."""

    DEFAULT_CSS = """
    Field { height: auto; width: 1fr; }
    Field > Label { color: $text-muted; padding: 0 1; }
    Field > Input, Field > Select { width: 1fr; }
    """

    def __init__(self, label: str, widget: Widget, **kwargs: str) -> None:
        super().__init__(Label(label, classes="field-label"), widget, **kwargs)  # type: ignore[arg-type]
