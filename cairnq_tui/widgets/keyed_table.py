"""A table of keyed rows, drawn on Textual's Line API and diffed by key on every refresh.

Rows keep their identity (a task id, a key, a queue): ``sync(rows)`` stores the
cells of the rows that changed, adds new keys, drops vanished ones, takes the
order it is given, and the cursor stays on the row it was on. Column widths
follow the content (the widest cell or label of each column; a column may also
have a fixed width).

The widget is a ``ScrollView`` whose ``render_line`` returns ``Strip``s: line 0 is
the header, which stays put, and row ``i`` is virtual line ``i + 1``. A line is
drawn the way Textual's ``DataTable`` draws a zebra-striped table with a row
cursor (the same component styles, cell padding, segments and mouse metadata),
so the console looks as it did when this was a ``DataTable``; it uses Textual's
public API only (no private module, method or attribute), which the DataTable
subclass it replaces could not do.

Drawing a line is ``table_lines.py``'s job (it renders each look of a cell
once). What this widget remembers is the strips it drew, per (row key, resolved
styles), each with what it was drawn from (the row's version, index, cursor,
hover, column widths, scroll and width): a cursor move draws two lines, a
refresh that changed a few cells draws their rows, a view shown again (its
table takes the focus) is drawn from the strips kept for the focused styles,
and a theme change resolves other styles and so misses. A plain dict, emptied
whole when it outgrows a page's worth: its entries hold no reference cycles,
so reference counting frees them at once and the cyclic collector has nothing
to scan for them.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.console import RenderableType
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size, Spacing
from textual.message import Message
from textual.render import measure
from textual.scroll_view import ScrollView
from textual.strip import Strip

from cairnq_tui import keymap
from cairnq_tui.widgets.table_lines import (
    EMPTY_CELL,
    HEADER_ROW,
    Column,
    Frame,
    LineDrawer,
    Palette,
    format_cell,
    look_of,
)

Row = tuple[str, Sequence[RenderableType]]
#: A column: (label, key) sized to its content, or (label, key, width) fixed.
ColumnSpec = tuple[str, str] | tuple[str, str, int]
#: Strips remembered beyond a few per row before the cache starts over.
STRIP_CACHE_SLACK = 200


@dataclass
class StoredRow:
    """A row's cells, what they look like, how wide they are, and when they changed."""

    cells: list[RenderableType]
    looks: tuple[Hashable, ...]
    widths: list[int]
    version: int


class RowMessage(Message):
    """About the row under the cursor: its index and key."""

    def __init__(self, table: KeyedTable, cursor_row: int, row_key: str) -> None:
        super().__init__()
        self.table = table
        self.cursor_row = cursor_row
        self.row_key = row_key

    @property
    def control(self) -> KeyedTable:
        return self.table


class KeyedTable(ScrollView, can_focus=True):
    """``sync(rows)`` makes the table show exactly ``rows``, in order, with minimal work."""

    ALLOW_SELECT = False
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "keyed-table--header",
        "keyed-table--header-hover",
        "keyed-table--even-row",
        "keyed-table--odd-row",
        "keyed-table--cursor",
        "keyed-table--hover",
    }
    # DataTable's look, for what a row-cursor table with zebra stripes uses of it.
    DEFAULT_CSS = """
    KeyedTable {
        background: $surface;
        color: $foreground;
        height: 1fr;
        max-height: 100%;
        &:focus {
            background-tint: $foreground 5%;
            & > .keyed-table--cursor {
                background: $block-cursor-background;
                color: $block-cursor-foreground;
                text-style: $block-cursor-text-style;
            }
            & > .keyed-table--header {
                background-tint: $foreground 5%;
            }
        }
        &:dark > .keyed-table--even-row {
            background: $surface-darken-1 40%;
        }
        & > .keyed-table--header {
            text-style: bold;
            background: $panel;
            color: $foreground;
        }
        &:ansi > .keyed-table--header {
            background: ansi_bright_blue;
            color: ansi_default;
        }
        & > .keyed-table--even-row {
            background: $surface-lighten-1 50%;
        }
        & > .keyed-table--cursor {
            background: $block-cursor-blurred-background;
            color: $block-cursor-blurred-foreground;
            text-style: $block-cursor-blurred-text-style;
        }
        & > .keyed-table--header-hover {
            background: $accent 30%;
        }
        & > .keyed-table--hover {
            background: $block-hover-background;
        }
    }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "select_cursor", "Select", show=False),
        Binding("up", "cursor_up", "Cursor up", show=False),
        Binding("down", "cursor_down", "Cursor down", show=False),
        Binding("pageup", "cursor_page_up", "Page up", show=False),
        Binding("pagedown", "cursor_page_down", "Page down", show=False),
        Binding("ctrl+home", "first_row", "Top", show=False),
        Binding("ctrl+end", "last_row", "Bottom", show=False),
        *keymap.TABLE,
    ]

    class RowHighlighted(RowMessage):
        """The cursor is on another row (or the row under it is another one)."""

    class RowSelected(RowMessage):
        """Enter (or a click on the cursor's row) chose the row under the cursor."""

    def __init__(
        self,
        columns: Sequence[ColumnSpec],
        *,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self._columns = [
            Column(spec[1], Text.from_markup(spec[0]), spec[2] if len(spec) == 3 else None, 0)
            for spec in columns
        ]
        self._order: list[str] = []
        self._index: dict[str, int] = {}
        self._rows: dict[str, StoredRow] = {}
        self._edits = 0
        #: Changes whenever a column's width does (every drawn line is stale then).
        self._layout = 0
        self._cursor = 0
        #: The row (or the header) the mouse is over, None when not shown.
        self._hover_row: int | None = None
        self._highlighted: tuple[int, str] | None = None
        self._palette: Palette | None = None
        self._drawer = LineDrawer()
        #: {(row key, or None for the header; palette): (what it was drawn from, strip)}.
        self._strip_cache: dict[tuple[str | None, Palette], tuple[Hashable, Strip]] = {}

    def on_mount(self) -> None:
        self._measure_columns()  # the labels' widths, before any row arrives

    # -- what callers read ---------------------------------------------------------------

    @property
    def row_count(self) -> int:
        """Rows shown."""
        return len(self._order)

    @property
    def cursor_row(self) -> int:
        """The cursor's row index (0 when the table is empty)."""
        return self._cursor

    @property
    def cursor_key(self) -> str | None:
        """The row key under the cursor (None when empty)."""
        if not self._order:
            return None
        return self._order[self._cursor]

    def row_keys(self) -> list[str]:
        """Row keys in display order."""
        return list(self._order)

    def get_row(self, key: str) -> list[RenderableType]:
        """The cells of the row ``key`` (KeyError when it is not shown)."""
        return list(self._rows[key].cells)

    def get_row_index(self, key: str) -> int:
        """Where the row ``key`` is (KeyError when it is not shown)."""
        return self._index[key]

    def column_labels(self) -> list[str]:
        """The column labels, left to right."""
        return [column.label.plain for column in self._columns]

    # -- the cursor ----------------------------------------------------------------------

    def move_cursor(self, *, row: int) -> None:
        """Put the cursor on ``row`` (clamped to the rows shown), scrolled into view."""
        old = self._cursor
        self._cursor = min(max(row, 0), max(self.row_count - 1, 0))
        if self._cursor != old:
            self._refresh_row(old)
            self._refresh_row(self._cursor)
        self._scroll_to_cursor()
        self._post_highlighted()

    def cursor_to(self, row: int) -> None:
        """Put the cursor on ``row`` (negative: from the end), scrolled into view."""
        if self.row_count:
            self.move_cursor(row=row if row >= 0 else self.row_count + row)

    def _scroll_to_cursor(self) -> None:
        """Scroll so that the cursor's row shows below the header."""
        if not self._order:
            return
        region = Region(int(self.scroll_x), self._cursor + 1, 1, 1)
        self.scroll_to_region(region, spacing=Spacing(1, 0, 0, 0), animate=False, force=True)

    def _post_highlighted(self) -> None:
        """Tell the views when the row under the cursor is another one."""
        key = self.cursor_key
        now = None if key is None else (self._cursor, key)
        if now is not None and now != self._highlighted:
            self.post_message(self.RowHighlighted(self, *now))
        self._highlighted = now

    def _show_hover(self, row: int | None) -> None:
        """Shade the row under the mouse (None: no row)."""
        if row != self._hover_row:
            for old_or_new in (self._hover_row, row):
                if old_or_new is not None:
                    self._refresh_row(old_or_new)
            self._hover_row = row

    def _refresh_row(self, row: int) -> None:
        """Draw the line of ``row`` (or of the header) again."""
        if row == HEADER_ROW:
            self.refresh(Region(0, 0, self.size.width, 1))
        else:
            self.refresh_line(row + 1)

    def _key_move(self, row: int) -> None:
        """A key moves the cursor: the mouse's shading goes until the mouse moves again."""
        self._show_hover(None)
        self.move_cursor(row=row)

    def action_cursor_up(self) -> None:
        self._key_move(self._cursor - 1)

    def action_cursor_down(self) -> None:
        self._key_move(self._cursor + 1)

    def action_cursor_page_up(self) -> None:
        self._key_move(self._cursor - self._rows_per_screen())

    def action_cursor_page_down(self) -> None:
        self._key_move(self._cursor + self._rows_per_screen())

    def _rows_per_screen(self) -> int:
        return max(self.scrollable_content_region.height - 1, 1)  # less the header

    def action_first_row(self) -> None:
        """Home (and ``g``): the cursor to the first row."""
        self._key_move(0)

    def action_last_row(self) -> None:
        """End (and ``G``): the cursor to the last row."""
        self._key_move(self.row_count - 1)

    def action_select_cursor(self) -> None:
        self._show_hover(None)
        key = self.cursor_key
        if key is not None:
            self.post_message(self.RowSelected(self, self._cursor, key))

    def on_click(self, event: events.Click) -> None:
        meta = event.style.meta
        row = meta.get("row")
        if not isinstance(row, int) or row == HEADER_ROW:
            return
        event.stop()
        self._show_hover(row)
        key = self.cursor_key
        if row == self._cursor and key is not None:  # a click on the cursor's row chooses it
            self.post_message(self.RowSelected(self, row, key))
        else:
            self.move_cursor(row=row)

    def on_mouse_move(self, event: events.MouseMove) -> None:
        row = event.style.meta.get("row")
        self._show_hover(row if isinstance(row, int) else None)

    def on_leave(self, event: events.Leave) -> None:
        self._show_hover(None)

    # -- keeping it in step --------------------------------------------------------------

    def sync(self, rows: Sequence[Row]) -> None:
        """Show ``rows`` (key, cells) in this order, drawing again only what changed."""
        keep, old_index = self.cursor_key, self._cursor
        order = [key for key, _ in rows]
        if len(set(order)) != len(order):
            raise ValueError("row keys must be unique")
        for key in set(self._order).difference(order):
            del self._rows[key]
        changed = [key for key, cells in rows if self._store_row(key, cells)]
        moved = order != self._order
        if moved:
            self._order = order
            self._index = {key: index for index, key in enumerate(order)}
        laid_out = self._measure_columns()
        index = self._index.get(keep, old_index) if keep is not None else old_index
        self._cursor = min(max(index, 0), max(self.row_count - 1, 0))
        if moved or laid_out or len(changed) > self._rows_per_screen():
            self.refresh()
        else:
            for key in changed:
                self._refresh_row(self._index[key])
        if self._cursor != old_index or laid_out:
            self._scroll_to_cursor()
            if laid_out:  # the scrollbars may come or go: once more after the layout
                self.call_after_refresh(self._scroll_to_cursor)
        self._post_highlighted()

    def _store_row(self, key: str, values: Sequence[RenderableType]) -> bool:
        """Keep ``values`` for row ``key``; True when it now looks different."""
        if len(values) > len(self._columns):
            raise ValueError(f"row {key!r} has more cells than the table has columns")
        cells = [format_cell(value) for value in values]
        cells += [EMPTY_CELL] * (len(self._columns) - len(cells))
        looks = tuple(look_of(cell) for cell in cells)
        before = self._rows.get(key)
        if before is not None and before.looks == looks:
            return False
        console = self.app.console
        widths = [
            before.widths[i]
            if before is not None and before.looks[i] == look
            else measure(console, cell, 1)
            for i, (cell, look) in enumerate(zip(cells, looks, strict=True))
        ]
        self._edits += 1
        self._rows[key] = StoredRow(cells, looks, widths, self._edits)
        return True

    def _measure_columns(self) -> bool:
        """Size every column to its widest cell or label; True when any width changed."""
        console = self.app.console
        widths = list(zip(*(row.widths for row in self._rows.values()), strict=True)) or [
            () for _ in self._columns
        ]
        changed = False
        for column, cells in zip(self._columns, widths, strict=True):
            width = max([measure(console, column.label, 1), *cells])
            if width != column.content_width:
                column.content_width, changed = width, True
        if changed:
            self._layout += 1
        self.virtual_size = Size(
            sum(column.render_width for column in self._columns), self.row_count + 1
        )
        return changed

    # -- drawing -------------------------------------------------------------------------

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._palette = None  # resolved again from the new styles on the next line drawn
        self.refresh()

    def _resolved_palette(self) -> Palette:
        """The styles lines are drawn with now (focus, theme and classes applied)."""
        if self._palette is None:
            styles, rich = self.get_component_styles, self.get_component_rich_style
            self._palette = Palette(
                self.rich_style,
                styles("keyed-table--header").rich_style,
                styles("keyed-table--even-row").rich_style,
                styles("keyed-table--odd-row").rich_style,
                rich("keyed-table--cursor"),
                rich("keyed-table--hover"),
                rich("keyed-table--header-hover"),
            )
        return self._palette

    def render_line(self, y: int) -> Strip:
        palette = self._resolved_palette()
        width, (scroll_x, scroll_y) = self.size.width, self.scroll_offset
        index = y - 1 + scroll_y if y else HEADER_ROW  # the header stays put on line 0
        if index >= len(self._order):
            return Strip.blank(width, palette.base)
        key = self._order[index] if index != HEADER_ROW else None
        cursor, hover = index == self._cursor, index == self._hover_row
        version = self._rows[key].version if key is not None else 0
        signature = (version, index, cursor, hover, self._layout, scroll_x, width)
        cached = self._strip_cache.get((key, palette))
        if cached is not None and cached[0] == signature:
            return cached[1]
        cells = self._rows[key].cells if key is not None else [c.label for c in self._columns]
        frame = Frame(
            self.app.console, self.app.console_options, palette, self._columns, width, scroll_x
        )
        strip = self._drawer.line(frame, index, cells, hover=hover, cursor=cursor)
        if len(self._strip_cache) >= 4 * self.row_count + STRIP_CACHE_SLACK:
            self._strip_cache.clear()  # a few strips per row: the rest are other pages'
        self._strip_cache[key, palette] = (signature, strip)
        return strip
