"""How one line of a ``KeyedTable`` is drawn: Textual DataTable's look, on public pieces.

A line is what DataTable draws for a zebra-striped table with a row cursor:
each cell padded by one column on either side and rendered through Rich with
the row's style and the cursor's or the hover's on top (the cursor's colour
over the cell's own), mouse metadata (``row``, ``column``) on every segment, and
the row's style carried to the widget's edge (``out_of_bounds``). Drawn the
same way, segment for segment, the console looks as it did and its snapshots
keep their bytes; ``tests/tui/test_keyed_table.py`` compares the two.

Rendering a cell through Rich is what a frame costs, and most cells of a page
read like many others ("queued", "default", "—"), so a ``LineDrawer`` renders a
Text cell once per look (its text, spans, styles and width) and places it: the
position's mouse metadata is the only part of a cell's segments that depends on
where it is.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from rich.console import Console, ConsoleOptions, RenderableType
from rich.padding import Padding
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.renderables.styled import Styled
from textual.strip import Strip

#: Rendered cells (by look) remembered before the cache starts over.
CELL_CACHE_SIZE = 2_000
#: Blank columns on each side of a cell.
CELL_PADDING = 1
#: The header's row index in mouse metadata (as DataTable has it).
HEADER_ROW = -1
EMPTY_CELL = Text(no_wrap=True, end="")


@dataclass
class Column:
    """A column: its key, its label, and the width of its content."""

    key: str
    label: Text
    #: A fixed content width, or None to fit the widest cell or the label.
    fixed_width: int | None
    content_width: int

    @property
    def render_width(self) -> int:
        """Cells the column takes on screen, padding included."""
        width = self.content_width if self.fixed_width is None else self.fixed_width
        return width + 2 * CELL_PADDING


class Palette(NamedTuple):
    """The styles a table is drawn with, resolved once per style update."""

    base: Style
    header: Style
    even_row: Style
    odd_row: Style
    cursor: Style
    hover: Style
    header_hover: Style


class Frame(NamedTuple):
    """What every line of a frame is drawn with."""

    console: Console
    options: ConsoleOptions
    palette: Palette
    columns: Sequence[Column]
    #: The widget's width and its horizontal scroll.
    width: int
    scroll_x: int


def format_cell(value: RenderableType | None) -> RenderableType:
    """What a cell shows: a string literally (never as markup: task fields are anyone's
    text) and its first line only, empty text for None or "", any renderable as is."""
    if isinstance(value, str):
        value = Text(value.split("\n", 1)[0], no_wrap=True, end="")
    if value is None or (isinstance(value, Text) and not value):
        return EMPTY_CELL
    return value


def look_of(cell: RenderableType) -> Hashable:
    """Everything a cell's drawing depends on (a renderable other than Text: itself)."""
    if isinstance(cell, Text):
        return (
            cell.plain,
            cell.style,
            tuple(cell.spans),
            cell.justify,
            cell.overflow,
            cell.no_wrap,
            cell.end,
            cell.tab_size,
        )
    return ("object", id(cell))  # the table holds the object, so the id stays its own


class LineDrawer:
    """Draws table lines, rendering each look of a Text cell once."""

    def __init__(self) -> None:
        #: {(look, pre style, post style, width): the cell's segments, no metadata}.
        self.cells: dict[Hashable, list[Segment]] = {}

    def line(
        self,
        frame: Frame,
        row: int,
        cells: Sequence[RenderableType],
        *,
        hover: bool = False,
        cursor: bool = False,
    ) -> Strip:
        """Row ``row`` (or the header, ``HEADER_ROW``) showing ``cells``, cropped to the widget."""
        palette = frame.palette
        if row == HEADER_ROW:
            row_style = palette.header
        else:
            row_style = palette.odd_row if row % 2 else palette.even_row
        over = Style()
        if hover:
            over += palette.hover
            if row == HEADER_ROW:
                over += palette.header_hover
        if cursor:
            over += palette.cursor
        post = Style.from_color(color=over.color)  # the cursor's colour over the cell's
        segments: list[Segment] = []
        for index, (column, cell) in enumerate(zip(frame.columns, cells, strict=True)):
            meta = Style.from_meta({"row": row, "column": index})
            segments += [
                Segment(text, style + meta, control)
                if style is not None and control is None
                else Segment(text, style, control)
                for text, style, control in self.cell(
                    frame, cell, row_style + over, post, column.render_width
                )
            ]
        table_width = sum(column.render_width for column in frame.columns)
        edge = row_style + over + Style.from_meta({"row": row, "column": 0, "out_of_bounds": True})
        segments.append(Segment(" " * max(0, frame.width - table_width), edge))
        return (
            Strip(segments)
            .crop(frame.scroll_x)
            .adjust_cell_length(frame.width, palette.base)
            .simplify()
        )

    def cell(
        self, frame: Frame, cell: RenderableType, pre_style: Style, post_style: Style, width: int
    ) -> list[Segment]:
        """A cell's one line, padded and styled, without position metadata."""
        key = (look_of(cell), pre_style, post_style, width) if isinstance(cell, Text) else None
        if key is not None and (cached := self.cells.get(key)) is not None:
            return cached
        options = frame.options.update_dimensions(width, 1).update(no_wrap=True)
        padded = Padding(cell, (0, CELL_PADDING))
        line = frame.console.render_lines(Styled(padded, pre_style, post_style), options)[0]
        if key is not None:
            if len(self.cells) >= CELL_CACHE_SIZE:
                self.cells.clear()
            self.cells[key] = line
        return line
