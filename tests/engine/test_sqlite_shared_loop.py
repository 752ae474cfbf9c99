"""SQLiteStore shares its event loop: store calls give the loop a turn, at least every 0.1 ms.

SQLite work runs inline on the caller's loop (cheaper than a thread hop), so a
task looping on store calls must still let timers, other tasks' commits and a
claim session that awaits between draws make progress. An inline read gives
its turn once ``TURN_EVERY_S`` passed since the thread's last one, not per call
(a turn costs about half a read). Timing is judged by
ratios against the same loop left idle, never by wall-clock limits.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from engine import CairnQ, SQLiteStore, Task
from engine.store import _sqlite_writer
from engine.store._sqlite_group import backoff

TICK_S = 0.01
LOOP_S = 0.5


@pytest.fixture
def store(sqlite_store: SQLiteStore) -> SQLiteStore:
    return sqlite_store


async def ticks_while(body: Callable[[], Awaitable[Any]], seconds: float) -> int:
    """How often a 10 ms ticker ran while ``body`` was called in a loop."""
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(TICK_S)
            ticks += 1

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        await body()
    task.cancel()
    return ticks


async def _idle() -> None:
    await asyncio.sleep(0)


async def ticks_against_idle(body: Callable[[], Awaitable[Any]]) -> tuple[int, int]:
    """``(ticks during body, ticks during an idle loop)``, over 0.5 s each.

    The two alternate in five rounds, so a burst of load on the machine (which
    delays every timer) falls on both alike.
    """
    measured = idle = 0
    for _ in range(5):
        idle += await ticks_while(_idle, LOOP_S / 5)
        measured += await ticks_while(body, LOOP_S / 5)
    return measured, idle


OPERATIONS: dict[str, Callable[[SQLiteStore], Awaitable[Any]]] = {
    "get": lambda s: s.get("absent"),
    "get_by_key": lambda s: s.get_by_key("absent"),
    "get_status": lambda s: s.get_status("absent"),
    "list": lambda s: s.list(limit=5),
    "stats": lambda s: s.stats(),
    "claim (nothing queued)": lambda s: s.claim(queues=["empty"], worker_id="w"),
    "keyed submit (existing key)": lambda s: s.submit(name="k", key="k"),
    "cancel_by_key": lambda s: s.cancel_by_key("absent"),
    "submit": lambda s: s.submit(name="plain"),
}


@pytest.mark.parametrize("operation", list(OPERATIONS))
async def test_every_store_call_gives_the_loop_a_turn_once_the_budget_is_spent(
    store: SQLiteStore, operation: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Counted in turns, not time: with the turn budget at 0 another task runs once per call."""
    monkeypatch.setattr(_sqlite_writer, "TURN_EVERY_S", 0.0)
    call = OPERATIONS[operation]
    await call(store)  # warm: the first keyed submit inserts
    turns = 0

    async def other() -> None:
        nonlocal turns
        while True:
            await asyncio.sleep(0)
            turns += 1

    task = asyncio.create_task(other())
    await asyncio.sleep(0)
    turns = 0
    for _ in range(100):
        await call(store)
    task.cancel()
    assert turns >= 100, (operation, turns)


@pytest.mark.parametrize("operation", ["get", "get_status", "list", "claim (nothing queued)"])
async def test_inline_reads_give_a_turn_whenever_the_budget_since_the_last_one_is_spent(
    store: SQLiteStore, operation: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a driven clock: a call 0.3 budgets after the last turn gives none, one after 1.2 does.

    An inline read costs less than a turn of the loop, so a task looping on reads
    gives one every ``TURN_EVERY_S`` rather than per call (bench/README.md).
    """
    now = [1_000.0]
    monkeypatch.setattr(_sqlite_writer, "_clock", lambda: now[0])
    monkeypatch.setattr(_sqlite_writer, "_turns", threading.local())
    budget = _sqlite_writer.TURN_EVERY_S
    call = OPERATIONS[operation]
    turns = 0

    async def other() -> None:
        nonlocal turns
        while True:
            await asyncio.sleep(0)
            turns += 1

    task = asyncio.create_task(other())
    await asyncio.sleep(0)
    now[0] += 10 * budget
    await call(store)  # a turn: the last one was long ago
    seen = turns
    for step, gives_turn in [(0.3, False), (0.3, False), (0.5, True), (0.2, False), (1.2, True)]:
        now[0] += step * budget
        await call(store)
        assert turns == seen + gives_turn, (operation, step)
        seen = turns
    task.cancel()


@pytest.mark.parametrize("operation", ["get", "keyed submit (existing key)", "submit"])
async def test_a_loop_of_store_calls_lets_a_ticker_run(store: SQLiteStore, operation: str) -> None:
    call = OPERATIONS[operation]
    # The issue's bar, 40 of 50 ticks, counted against the idle loop's own
    # count so a loaded machine's late timers do not fail it. A store that
    # starves the loop misses the bar on every try; a burst of load on a shared
    # machine misses it on one at most, so three tries keep the first and drop
    # the second (it failed once in a loaded full-suite run).
    seen: list[tuple[int, int]] = []
    for _ in range(3):
        ticks, idle = await ticks_against_idle(lambda: call(store))
        seen.append((ticks, idle))
        if ticks >= 0.8 * idle:
            return
    raise AssertionError((operation, seen))


async def test_the_issue_example_through_the_client(sqlite_path: Path) -> None:
    client = CairnQ.sqlite(str(sqlite_path))
    await client.connect()
    seen: list[tuple[int, int]] = []
    try:
        # Three tries, as above (29 of 45 once, at load 3 on 2 cores).
        for _ in range(3):
            ticks, idle = await ticks_against_idle(lambda: client.get("absent"))
            seen.append((ticks, idle))
            if ticks >= 0.8 * idle:
                return
    finally:
        await client.close()
    raise AssertionError(seen)


async def test_commits_and_a_held_write_lock_progress_while_a_task_loops_on_reads(
    store: SQLiteStore, sqlite_path: Path
) -> None:
    await store.submit(name="job")
    await store.submit(name="job")

    async def plan(draw: Any) -> list[Task]:
        first = await draw(None, 1)
        # The session holds the write lock across this await: only a loop that
        # gets its turns back lets it reach the COMMIT that releases it.
        await asyncio.sleep(TICK_S)
        return first + await draw(None, 1)

    async def writer() -> int:
        return len([await store.submit(name="other", payload={"i": i}) for i in range(20)])

    session = asyncio.create_task(
        store.claim_session(queues=["default"], worker_id="w", names=None, plan=plan)
    )
    writes = asyncio.create_task(writer())
    # A generous bound: without turns for the other tasks this loops until it.
    deadline = time.monotonic() + 20
    reads = 0
    while not (session.done() and writes.done()) and time.monotonic() < deadline:
        await store.get("absent")
        reads += 1
    assert session.done() and writes.done(), "other tasks made no progress during the reads"
    assert len(await session or []) == 2
    assert await writes == 20
    # The session's lock is released: another connection commits without waiting.
    other = sqlite3.connect(sqlite_path, timeout=0, isolation_level=None)
    try:
        other.execute("insert into cairnq_meta (key, value) values ('probe', 'x')")
    finally:
        other.close()
    assert reads > 0


def test_a_waiting_writer_asks_for_the_lock_again_often() -> None:
    """SQLite gives a released write lock to whoever asks first, not to the
    longest waiter: a writer that backed off for 50 ms kept losing it to other
    processes on the same file. Every wait between two tries stays short."""
    waits = [backoff(attempt) for attempt in range(40) for _ in range(20)]
    assert max(waits) <= 0.015
    assert min(waits) > 0
