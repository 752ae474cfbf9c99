"""A DataTable that is diffed by row key instead of being cleared every refresh.

Rows keep their identity (a task id, a key, a queue): cells that changed are
updated in place, new keys are added, vanished keys removed, and the cursor
stays on the row it was on. Only when most rows are new (another page) or the
order changed in a way a sort cannot restore is the table rebuilt.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import RenderableType
from textual.widgets import DataTable
from textual.widgets.data_table import RowDoesNotExist

Row = tuple[str, Sequence[RenderableType]]
#: A column: (label, key) sized to its content, or (label, key, width) fixed.
ColumnSpec = tuple[str, str] | tuple[str, str, int]


class KeyedTable(DataTable[RenderableType]):
    """``sync(rows)`` makes the table show exactly ``rows``, in order, with minimal edits."""

    DEFAULT_CSS = """
    KeyedTable { height: 1fr; }
    """

    def __init__(self, columns: Sequence[ColumnSpec], **kwargs: object) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)  # type: ignore[arg-type]
        self._column_keys = [spec[1] for spec in columns]
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
