"""KeyedTable draws exactly what DataTable would: its own cell cache (by look, not
position), the caches it keeps across focus changes, and its smaller cache sizes
must never change a single segment, style or piece of mouse metadata."""

from __future__ import annotations

from typing import Any

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
    def compose(self) -> ComposeResult:
        yield KeyedTable(COLUMNS)
        yield Button("elsewhere")


def drawn(table: KeyedTable) -> list[list[Segment]]:
    """Every visible line as segments, with each segment's style and metadata."""
    table._styles_cache.clear()
    strips = table.render_lines(Region(0, 0, table.size.width, table.size.height))
    return [list(strip) for strip in strips]


def fresh(table: KeyedTable) -> list[list[Segment]]:
    """The same lines drawn by DataTable alone, every cache emptied first."""
    table._looks.clear()
    table._placed.clear()
    table._clear_caches()
    original = KeyedTable._render_cell
    KeyedTable._render_cell = DataTable._render_cell  # type: ignore[method-assign]
    try:
        return drawn(table)
    finally:
        KeyedTable._render_cell = original  # type: ignore[method-assign]


def same(table: KeyedTable) -> None:
    first = drawn(table)
    assert first == fresh(table)
    assert [[s.style.meta if s.style else None for s in line] for line in first] == [
        [s.style.meta if s.style else None for s in line] for line in fresh(table)
    ]


async def thirty_rows(app: TableApp, pilot: Any) -> KeyedTable:
    """The app's table, focused, showing rows 30..1 newest first, drawn."""
    table = app.query_one(KeyedTable)
    table.focus()
    table.sync(rows(range(30, 0, -1)), sort_column="id", reverse=True)
    await pilot.pause()
    return table


async def test_cached_cells_render_exactly_as_datatable() -> None:
    app = TableApp()
    async with app.run_test(size=(60, 20)) as pilot:
        table = await thirty_rows(app, pilot)
        same(table)
        # New rows on top: every row moves, most looks are already cached elsewhere.
        table.sync(rows(range(36, 6, -1), frozenset({20})), sort_column="id", reverse=True)
        await pilot.pause()
        same(table)
        table.move_cursor(row=3)
        await pilot.pause()
        same(table)
        # Focus away and back: the caches kept for either state are still right.
        app.query_one(Button).focus()
        await pilot.pause()
        same(table)
        table.focus()
        await pilot.pause()
        same(table)
        # A theme change empties them as DataTable does.
        app.theme = "textual-light"
        await pilot.pause()
        same(table)


async def test_focus_change_keeps_drawn_lines() -> None:
    app = TableApp()
    async with app.run_test(size=(60, 20)) as pilot:
        table = await thirty_rows(app, pilot)
        drawn(table)
        app.query_one(Button).focus()
        await pilot.pause()
        drawn(table)
        calls: list[Any] = []
        original = table._render_line_in_row

        def counting(*args: Any, **kwargs: Any) -> Any:
            calls.append(args)
            return original(*args, **kwargs)

        table._render_line_in_row = counting  # type: ignore[method-assign]
        table.focus()
        await pilot.pause()
        drawn(table)
        assert calls == []  # every line came from the cache kept for the focused state


async def test_lines_painted_before_the_width_pass_are_not_reused() -> None:
    """A frame painted between ``sync`` and DataTable's idle width pass (a screen
    refresh that gets in first under load) must not leave lines cut to the old widths."""
    app = TableApp()
    async with app.run_test(size=(100, 20)) as pilot:
        table = app.query_one(KeyedTable)
        await pilot.pause()
        long_rows = [
            (key, [Text(" "), Text(f"{key}-{'y' * 30}"), Text("succeeded"), Text("k")])
            for key in ("a", "b", "c")
        ]
        table.sync(long_rows)
        early = drawn(table)  # painted before the idle pass: columns still narrow
        assert "a-yyyy" not in "".join(s.text for s in early[1])
        await pilot.pause()  # the idle pass widens the ID and Status columns
        line = "".join(s.text for s in drawn(table)[1])
        assert f"a-{'y' * 30}" in line and "succeeded" in line
        same(table)
