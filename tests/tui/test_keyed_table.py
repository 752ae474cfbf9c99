"""KeyedTable draws exactly what Textual's DataTable draws for the same rows (a
zebra-striped table with a row cursor: segments, styles and mouse metadata), in
every state its caches distinguish, and behaves as the views need: rows diffed
by key with the cursor kept on its row, keys, mouse and messages."""

from __future__ import annotations

from typing import Any

import pytest
from rich.segment import Segment
from rich.text import Text
from textual.app import App, ComposeResult
from textual.geometry import Region
from textual.widgets import Button, DataTable

from cairnq_tui.widgets.keyed_table import KeyedTable

COLUMNS = [("", "sel"), ("ID", "id"), ("Status", "status"), ("Key", "key", 8)]
STATUS = ["queued", "running", "succeeded", "failed"]


def rows(ids: range, selected: frozenset[int] = frozenset()) -> list[tuple[str, list[Text]]]:
    return [
        (
            f"t{i:03d}",
            [
                Text("●", style="bold magenta") if i in selected else Text(" "),
                Text(f"t{i:03d}", style="dim"),
                Text(STATUS[i % 4], style="green" if i % 4 == 2 else ""),
                Text("k-" + "x" * (i % 12), no_wrap=True, overflow="ellipsis"),
            ],
        )
        for i in ids
    ]


class TableApp(App[None]):
    CSS = "KeyedTable, DataTable { height: 12; max-height: 12; }"

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[Any] = []

    def compose(self) -> ComposeResult:
        yield KeyedTable(COLUMNS)
        yield DataTable(cursor_type="row", zebra_stripes=True)
        yield Button("elsewhere")

    def on_mount(self) -> None:
        reference = self.query_one(DataTable)
        for spec in COLUMNS:
            reference.add_column(spec[0], key=spec[1], width=spec[2] if len(spec) == 3 else None)

    def on_keyed_table_row_highlighted(self, event: KeyedTable.RowHighlighted) -> None:
        self.seen.append(("highlighted", event.cursor_row, event.row_key))

    def on_keyed_table_row_selected(self, event: KeyedTable.RowSelected) -> None:
        self.seen.append(("selected", event.cursor_row, event.row_key))

    def show(self, shown: list[tuple[str, list[Text]]], cursor: int) -> None:
        """The same rows in both tables, the cursor on the same row."""
        self.query_one(KeyedTable).sync(shown)
        self.query_one(KeyedTable).move_cursor(row=cursor)
        reference = self.query_one(DataTable)
        reference.clear()
        for key, cells in shown:
            reference.add_row(*cells, key=key)
        reference.move_cursor(row=cursor)


def drawn(table: KeyedTable | DataTable[Any]) -> list[list[Segment]]:
    """Every visible line as segments, with each segment's style and metadata."""
    table.refresh()
    strips = table.render_lines(Region(0, 0, table.size.width, table.size.height))
    return [list(strip) for strip in strips]


async def same(app: TableApp, pilot: Any, *, focused: bool) -> None:
    """Both tables draw the same lines, each either focused or not."""
    mine, reference = app.query_one(KeyedTable), app.query_one(DataTable)
    if not focused:
        app.query_one(Button).focus()
        await pilot.pause()
        assert drawn(mine) == drawn(reference)
        return
    mine.focus()
    await pilot.pause()
    ours = drawn(mine)
    reference.focus()
    await pilot.pause()
    assert ours == drawn(reference)


async def test_draws_exactly_as_datatable() -> None:
    app = TableApp()
    async with app.run_test(size=(60, 30)) as pilot:
        app.show(rows(range(30, 0, -1)), cursor=3)
        await pilot.pause()
        await same(app, pilot, focused=False)
        await same(app, pilot, focused=True)
        # New rows on top and a selection mark: every row moves, the cursor with them.
        app.show(rows(range(36, 6, -1), frozenset({20})), cursor=9)
        await pilot.pause()
        await same(app, pilot, focused=True)
        await same(app, pilot, focused=False)
        for table in (app.query_one(KeyedTable), app.query_one(DataTable)):
            table.scroll_to(y=7, animate=False)
        await pilot.pause()
        await same(app, pilot, focused=False)
        app.theme = "textual-light"
        await pilot.pause()
        await same(app, pilot, focused=True)
        # The mouse over a row shades it (the hover cursor), and over the header.
        app.query_one(Button).focus()
        for y in (4, 0):
            hovered = []
            for table in (app.query_one(KeyedTable), app.query_one(DataTable)):
                await pilot.hover(table, offset=(3, y))
                await pilot.pause()
                hovered.append(drawn(table))
            assert hovered[0] == hovered[1]


async def test_narrow_table_and_empty_table_draw_as_datatable() -> None:
    app = TableApp()
    async with app.run_test(size=(24, 30)) as pilot:  # narrower than the table: cropped
        app.show(rows(range(5)), cursor=1)
        await pilot.pause()
        await same(app, pilot, focused=True)
    app = TableApp()
    async with app.run_test(size=(60, 30)) as pilot:  # no rows yet: the header alone
        await pilot.pause()
        await same(app, pilot, focused=False)


async def test_rows_are_diffed_by_key_and_the_cursor_stays_on_its_row() -> None:
    app = TableApp()
    async with app.run_test(size=(60, 30)) as pilot:
        table = app.query_one(KeyedTable)
        table.focus()
        table.sync(rows(range(10, 0, -1)))
        table.move_cursor(row=4)
        await pilot.pause()
        assert table.cursor_key == "t006"
        table.sync(rows(range(13, 0, -1)))  # three new rows on top
        assert table.row_keys()[:4] == ["t013", "t012", "t011", "t010"]
        assert table.cursor_key == "t006" and table.cursor_row == 7
        renamed = [(key, [*cells[:3], Text("changed")]) for key, cells in rows(range(13, 0, -1))]
        table.sync(renamed)
        assert str(table.get_row("t006")[3]) == "changed" and table.cursor_key == "t006"
        table.sync(rows(range(5, 0, -1)))  # the cursor's row is gone: same place, clamped
        assert table.cursor_row == 4 and table.cursor_key == "t001"
        table.sync([])
        assert table.row_count == 0 and table.cursor_key is None
        with pytest.raises(ValueError, match="unique"):
            table.sync([*rows(range(2)), *rows(range(1))])


async def test_columns_fit_their_widest_cell_or_label() -> None:
    app = TableApp()
    async with app.run_test(size=(100, 30)) as pilot:
        table = app.query_one(KeyedTable)
        table.sync([("a", [Text(" "), Text("a-" + "y" * 30), Text("ok"), Text("k")])])
        await pilot.pause()
        line = drawn(table)[1]
        assert "a-" + "y" * 30 in "".join(s.text for s in line)
        assert table.virtual_size.width == (1 + 32 + 6 + 8) + 2 * 4
        table.sync([("b", [Text(" "), Text("b"), Text("ok"), Text("k")])])
        assert table.virtual_size.width == (1 + 2 + 6 + 8) + 2 * 4  # narrower again
        assert table.column_labels() == ["", "ID", "Status", "Key"]


async def test_keys_mouse_and_messages() -> None:
    app = TableApp()
    async with app.run_test(size=(60, 30)) as pilot:
        table = app.query_one(KeyedTable)
        table.focus()
        table.sync(rows(range(40, 0, -1)))
        await pilot.pause()
        assert app.seen == [("highlighted", 0, "t040")]
        await pilot.press("down", "down")
        assert table.cursor_row == 2
        await pilot.press("end")
        assert table.cursor_row == 39 and table.scroll_y > 0
        await pilot.press("g")
        assert table.cursor_row == 0 and table.scroll_y == 0
        await pilot.press("G", "home", "pagedown")
        assert table.cursor_row == 11  # a screenful: 12 lines less the header
        await pilot.press("enter")
        await pilot.pause()
        assert app.seen[-1] == ("selected", 11, "t029")
        await pilot.click(table, offset=(3, 2))  # a click moves the cursor to its row
        await pilot.pause()
        assert table.cursor_row == table.scroll_offset.y + 1
        row = table.cursor_row
        await pilot.click(table, offset=(3, 2))  # and a click on the cursor's row chooses it
        await pilot.pause()
        assert app.seen[-1] == ("selected", row, table.row_keys()[row])
        await pilot.click(table, offset=(3, 0))  # the header: nothing
        assert table.cursor_row == row
        before = table.scroll_y
        await pilot.mouse_down(table)
        await pilot.pause()
        table.post_message(_wheel(table))
        await pilot.pause()
        assert table.scroll_y > before


def _wheel(table: KeyedTable) -> Any:
    from textual.events import MouseScrollDown

    return MouseScrollDown(table, 3, 3, 0, 0, 0, False, False, False)


async def test_a_view_shown_again_draws_from_its_strips() -> None:
    app = TableApp()
    async with app.run_test(size=(60, 30)) as pilot:
        table = app.query_one(KeyedTable)
        table.sync(rows(range(30, 0, -1)))
        table.focus()
        await pilot.pause()
        drawn(table)
        app.query_one(Button).focus()
        await pilot.pause()
        drawn(table)
        cells: list[Any] = []
        drawer = table._drawer  # no public window shows what is drawn anew
        original = drawer.cell

        def counting(*args: Any) -> Any:
            cells.append(args)
            return original(*args)

        drawer.cell = counting  # type: ignore[method-assign]
        table.focus()
        await pilot.pause()
        drawn(table)
        assert cells == []  # every line came from the strips kept for the focused styles
        await pilot.press("down")
        drawn(table)
        assert 0 < len(cells) <= 2 * len(COLUMNS)  # a cursor move draws its two rows


async def test_a_string_cell_is_shown_literally_first_line_only() -> None:
    app = TableApp()
    async with app.run_test(size=(60, 30)) as pilot:
        table = app.query_one(KeyedTable)
        table.sync([("a", [None, "[bold]x[/bold]", "two\nlines", Text("k")])])
        await pilot.pause()
        line = "".join(s.text for s in drawn(table)[1])
        assert "[bold]x[/bold]" in line and "two" in line and "lines" not in line
