"""Scenario 6, console side: hostile text in task fields is shown literally, never interpreted.

Task fields are written by whoever submits work, so the console must treat them
as data: Rich markup (``[bold]``, ``[link=…]``) must appear as typed, and
terminal escape sequences must never reach the terminal as control bytes. The
database is written through the engine; the console under test only reads it.
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

from cairnq_tui.app import ConsoleApp, Settings
from cairnq_tui.screens.detail import TaskDetailScreen
from cairnq_tui.target import Target
from cairnq_tui.widgets.tasks_view import TasksView
from engine import SQLiteStore

NAME = "[bold]n1[/bold]\x1b[31m"
QUEUE = "[red]q1[/red]"
KEY = "[link=http://x]k1[/link]\x1b]0;pwn\x07"
MESSAGE = "[blink]m1[/blink]\x1b[2J"
ERROR = "[reverse]e1[/reverse]\x1b[?1049h"


async def build(path: Path) -> str:
    store = SQLiteStore(str(path))
    async with store:
        task = await store.submit(
            name=NAME, queue=QUEUE, key=KEY, payload={"p": MESSAGE}, metadata={"[i]m[/i]": KEY}
        )
        await store.claim(queues=[QUEUE], worker_id="worker_[b]w[/b]", lease_ms=60_000)
        await store.progress(
            task_id=task.id, worker_id="worker_[b]w[/b]", progress=0.5, message=MESSAGE
        )
        await store.fail(
            task_id=task.id,
            worker_id="worker_[b]w[/b]",
            error={"type": "[u]T[/u]", "code": "c", "message": ERROR, "retryable": False},
            retryable=False,
        )
    return task.id


async def settle(pilot: Any) -> None:
    app = pilot.app
    for _ in range(300):
        await pilot.pause(0.02)
        if app.connected and app.ticks and not app._in_flight:
            break
    await app.workers.wait_for_complete()
    await pilot.pause(0.05)


def no_control_bytes(text: str) -> bool:
    return not any(ch in text for ch in ("\x1b", "\x07", "\x9b"))


async def test_hostile_fields_are_shown_literally(tmp_path: Path) -> None:
    path = tmp_path / "hostile.db"
    task_id = await build(path)
    app = ConsoleApp(
        SQLiteStore(str(path)),
        Settings(target=Target(str(path), "sqlite", "hostile.db"), refresh_s=3600.0),
    )
    async with app.run_test(size=(220, 50)) as pilot:
        await settle(pilot)
        table = app.screen.query_one(TasksView).table
        row = " ".join(str(cell) for cell in table.get_row(task_id))
        for literal in ("[bold]n1[/bold]", "[red]q1[/red]"):
            assert literal in row, row
        assert no_control_bytes(row), repr(row)
        screen_text = screen_text_of(app)
        assert "[bold]n1[/bold]" in screen_text and no_control_bytes(screen_text)

        app.open_task(task_id)
        await settle(pilot)
        detail = app.screen
        assert isinstance(detail, TaskDetailScreen)
        shown = screen_text_of(app)
        shown += " ".join(str(node.label) for tree in detail.query("Tree") for node in walk(tree))
        for literal in ("[bold]n1[/bold]", "[red]q1[/red]", "[blink]m1[/blink]", "[reverse]e1"):
            assert literal in shown, (literal, shown[:3000])
        assert no_control_bytes(shown), repr(shown[:3000])


def screen_text_of(app: Any) -> str:
    """What is on the screen, as text: the SVG export with its markup stripped."""
    svg = app.export_screenshot()
    body = re.sub(r"<[^>]+>", "", svg.split("</style>", 1)[-1])
    return html.unescape(body).replace("\xa0", " ")


def walk(tree: Any) -> list[Any]:
    nodes, stack = [], [tree.root]
    while stack:
        node = stack.pop()
        nodes.append(node)
        stack.extend(node.children)
    return nodes
