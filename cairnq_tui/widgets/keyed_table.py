"""A DataTable that is diffed by row key instead of being cleared every refresh.

Rows keep their identity (a task id, a key, a queue): cells that changed are
updated in place, new keys are added, vanished keys removed, and the cursor
stays on the row it was on. Only when most rows are new (another page) or the
order changed in a way a sort cannot restore is the table rebuilt.

Rendering a cell through Rich is what a table frame costs (a 50-row page of 14
columns is hundreds of cells), and DataTable throws its own cell cache away on
every edit, resize, focus or blur. ``_render_cell`` therefore keeps a second
cache keyed by what a cell looks like (its text, spans, width and styles), not
by where it is: showing a tab again, moving focus, or a refresh that changed
only some cells renders only the cells that changed, and the many cells that
read the same ("queued", "default", "—") are rendered once. A cell rendered
for another row or column gets that position's mouse metadata, which is the
only part of the output that depends on position.

Focus moves to a view's table whenever the view is shown. DataTable keys its
row and line caches by the focus state already, yet it empties them on every
style update, focus included; a focus change therefore keeps them, so the
first frame of a view shown again is drawn from them (a theme or CSS change
still empties them).

Emptying DataTable's LRU caches leaves their entries in rings ([prev, next, key,
value] lists pointing at each other): garbage only the cyclic collector frees,
and a full collection over the console's heap is a pause of 100 ms or more. The
rings are unlinked first, so reference counting frees the entries at once. For
the same reason the caches are sized for a screenful of a page (DataTable's are
sized for tables of thousands of rows): every entry holds a Strip of segments,
and what the caches hold is what each full collection has to scan.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

from rich.console import RenderableType
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.cache import LRUCache
from textual.render import measure
from textual.widget import Widget
from textual.widgets import DataTable
from textual.widgets._data_table import default_cell_formatter
from textual.widgets.data_table import CellKey, ColumnKey, RowDoesNotExist, RowKey

from cairnq_tui import keymap

#: Rendered lines of one cell, as DataTable keeps them.
Lines = list[list[Segment]]
#: Cells (look and position) remembered per table before the cache starts over.
CELL_CACHE_SIZE = 2_000
#: Entries of DataTable's row and line caches: a screenful of rows in a few
#: cursor positions and both focus states.
LINE_CACHE_SIZE = 300

Row = tuple[str, Sequence[RenderableType]]
#: A column: (label, key) sized to its content, or (label, key, width) fixed.
ColumnSpec = tuple[str, str] | tuple[str, str, int]


class KeyedTable(DataTable[RenderableType]):
    """``sync(rows)`` makes the table show exactly ``rows``, in order, with minimal edits."""

    DEFAULT_CSS = """
    KeyedTable { height: 1fr; }
    """
    BINDINGS = keymap.TABLE

    def __init__(self, columns: Sequence[ColumnSpec], **kwargs: object) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)  # type: ignore[arg-type]
        self._column_keys = [spec[1] for spec in columns]
        #: {look of a cell: its lines as first rendered (at some position)}.
        self._looks: dict[Hashable, Lines] = {}
        #: {(look, row index, column index): its lines at that position}.
        self._placed: dict[tuple[Hashable, int, int], Lines] = {}
        self._focus_changing = False
        self._row_render_cache = LRUCache(LINE_CACHE_SIZE)
        self._line_cache = LRUCache(LINE_CACHE_SIZE)
        self._row_renderable_cache = LRUCache(LINE_CACHE_SIZE)
        self._cell_render_cache = LRUCache(LINE_CACHE_SIZE)  # body cells: see _render_cell
        for spec in columns:
            width = spec[2] if len(spec) == 3 else None
            self.add_column(spec[0], key=spec[1], width=width)

    @property
    def cursor_key(self) -> str | None:
        """The row key under the cursor (None when empty)."""
        if not self.row_count:
            return None
        try:
            return self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value
        except Exception:  # the cursor can point past the last row for a moment
            return None

    def cursor_to(self, row: int) -> None:
        """Put the cursor on ``row`` (negative: from the end), scrolled into view."""
        if not self.row_count:
            return
        index = row if row >= 0 else self.row_count + row
        self.move_cursor(row=min(max(index, 0), self.row_count - 1), animate=False, scroll=True)

    def action_first_row(self) -> None:
        """Home (and ``g``): the cursor to the first row."""
        self.cursor_to(0)

    def action_last_row(self) -> None:
        """End (and ``G``): the cursor to the last row."""
        self.cursor_to(-1)

    def row_keys(self) -> list[str]:
        """Row keys in display order."""
        return [str(row.key.value) for row in self.ordered_rows]

    def sync(
        self, rows: Sequence[Row], *, sort_column: str | None = None, reverse: bool = False
    ) -> None:
        """Show ``rows`` (key, cells) in this order.

        ``sort_column`` names a column whose plain text orders the rows (so a new
        row can be added and sorted into place instead of rebuilding).
        """
        keep = self.cursor_key
        old_index = self.cursor_row
        wanted = [key for key, _ in rows]
        current = self.row_keys()
        old = set(current)
        stale = old - set(wanted)
        with self.app.batch_update():
            if not current or len(stale) * 2 > len(current):
                self._rebuild(rows)
            else:
                for key in stale:
                    self.remove_row(key)
                for key, cells in rows:
                    if key in old:
                        self._update(key, cells)
                    else:
                        self.add_row(*cells, key=key)
                if self.row_keys() != wanted:
                    if sort_column is not None:
                        self.sort(sort_column, key=lambda cell: str(cell), reverse=reverse)
                    if self.row_keys() != wanted:
                        self._rebuild(rows)
            self._restore_cursor(keep, old_index)

    def _rebuild(self, rows: Sequence[Row]) -> None:
        self.clear()
        for key, cells in rows:
            self.add_row(*cells, key=key)

    def _update(self, key: str, cells: Sequence[RenderableType]) -> None:
        before = self.get_row(key)
        for column, old_value, new_value in zip(self._column_keys, before, cells, strict=True):
            if old_value != new_value:
                # Widen the column when the new value is longer (a key that just arrived).
                self.update_cell(key, column, new_value, update_width=True)

    def _restore_cursor(self, key: str | None, old_index: int) -> None:
        if not self.row_count:
            return
        try:
            index = self.get_row_index(key) if key is not None else old_index
        except RowDoesNotExist:
            index = old_index
        index = min(max(index, 0), self.row_count - 1)
        if index != self.cursor_row:
            self.move_cursor(row=index, animate=False, scroll=True)

    # -- rendering ---------------------------------------------------------------------

    async def _on_idle(self, event: events.Idle) -> None:
        # DataTable measures new and edited cells here and widens their columns, but
        # keeps ``_update_count`` (the key of its line, row and cell caches) as it was.
        # A frame painted between ``add_row`` and this pass (a screen refresh that
        # gets in first, as it does under load) left lines cut to the old widths in
        # those caches, and they were drawn again until the next edit. New widths
        # are a new state: bump the count so nothing painted before them is reused.
        before = self._widths()
        await super()._on_idle(event)
        if self._widths() != before:
            self._update_count += 1
            self.refresh()

    def _update_column_widths(self, updated_cells: set[CellKey]) -> None:
        # DataTable measures each updated cell, and for every one narrower than its
        # column measures the whole column again: a refresh that updates the age
        # cells of a 50-row page measured 2,500 cells per column, on the loop a
        # keypress waits behind. Same widths here, each column measured at most once.
        by_column: dict[ColumnKey, list[RowKey]] = {}
        for row_key, column_key in updated_cells:
            if column_key in self.columns and row_key in self.rows:
                by_column.setdefault(column_key, []).append(row_key)
        console = self.app.console
        for column_key, row_keys in by_column.items():
            column = self.columns[column_key]
            widths = [self._cell_width(row_key, column_key) for row_key in row_keys]
            if min(widths) < column.content_width:  # one may have shrunk: measure them all
                widths = [self._cell_width(row_key, column_key) for row_key in self.rows]
            column.content_width = max(*widths, measure(console, column.label, 1))
        self._require_update_dimensions = True

    def _cell_width(self, row_key: RowKey, column_key: ColumnKey) -> int:
        height = self.rows[row_key].height
        cell = default_cell_formatter(
            self._data[row_key][column_key], wrap=height != 1, height=height
        )
        return measure(self.app.console, cell, 1)

    def _widths(self) -> list[int]:
        return [self._label_column.content_width] + [
            column.content_width for column in self.columns.values()
        ]

    def watch_has_focus(self, has_focus: bool) -> None:
        self._focus_changing = True
        try:
            super().watch_has_focus(has_focus)
        finally:
            self._focus_changing = False

    def notify_style_update(self) -> None:
        if not self._focus_changing:
            self._unlink_caches()  # DataTable empties them all (as a theme change must)
            super().notify_style_update()
            return
        # Only the :focus rules changed which of them apply. DataTable's row, line
        # and cell caches are keyed by the pseudo-class state, so what they hold for
        # either state is still right: keep them. What is not keyed by it goes.
        Widget.notify_style_update(self)
        self._styles_cache.clear()
        self._get_styles_to_render_cell.cache_clear()
        self.refresh()

    def _clear_caches(self) -> None:
        self._unlink_caches()
        super()._clear_caches()

    def _unlink_caches(self) -> None:
        for cache in (
            self._row_render_cache,
            self._cell_render_cache,
            self._row_renderable_cache,
            self._line_cache,
            self._offset_cache,
            self._ordered_row_cache,
        ):
            _unlink(cache)

    def _render_cell(
        self,
        row_index: int,
        column_index: int,
        base_style: Style,
        width: int,
        cursor: bool = False,
        hover: bool = False,
    ) -> Lines:
        look = self._look(row_index, column_index, base_style, width, cursor, hover)
        if look is None:
            return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        placed = self._placed.get((look, row_index, column_index))
        if placed is not None:
            return placed
        if len(self._placed) >= CELL_CACHE_SIZE:
            self._placed.clear()
            self._looks.clear()
        source = self._looks.get(look)
        if source is None:
            lines = super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
            self._looks[look] = lines
        else:
            # The same look elsewhere: only the position in the mouse metadata differs.
            meta = Style.from_meta({"row": row_index, "column": column_index})
            lines = [
                [
                    Segment(seg.text, seg.style + meta, seg.control)
                    if seg.style is not None and seg.control is None
                    else seg
                    for seg in line
                ]
                for line in source
            ]
        self._placed[look, row_index, column_index] = lines
        return lines

    def _look(
        self,
        row_index: int,
        column_index: int,
        base_style: Style,
        width: int,
        cursor: bool,
        hover: bool,
    ) -> Hashable | None:
        """What a body cell's rendering depends on apart from its position (None: no cache)."""
        if row_index < 0 or column_index < 0:
            return None  # the header and row labels: few, and DataTable caches them
        try:
            row_key = self._row_locations.get_key(row_index)
            column_key = self._column_locations.get_key(column_index)
            if row_key is None or column_key is None:
                return None
            cell = self._data[row_key][column_key]
            height = self.rows[row_key].height
        except KeyError:
            return None
        if not isinstance(cell, Text) or height != 1:
            return None
        fixed = row_index < self.fixed_rows or column_index < self.fixed_columns
        styles = self._get_styles_to_render_cell(
            False,
            False,
            fixed,
            hover,
            cursor,
            self.show_cursor,
            self._show_hover_cursor,
            self.cursor_foreground_priority == "css",
            self.cursor_background_priority == "css",
        )
        return (
            cell.plain,
            cell.style,
            tuple(cell.spans),
            cell.justify,
            cell.overflow,
            cell.no_wrap,
            cell.end,
            cell.tab_size,
            base_style,
            styles,
            width,
            self.cell_padding,
            fixed,
        )


def _unlink(cache: LRUCache[Any, Any]) -> None:
    """Empty a textual ``LRUCache``, unlinking its ring so the entries die by reference count."""
    entries = getattr(cache, "_cache", None)
    if isinstance(entries, dict):
        for entry in entries.values():
            if isinstance(entry, list):
                entry.clear()
    cache.clear()
