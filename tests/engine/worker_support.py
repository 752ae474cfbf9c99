"""Shared pieces of the worker and client tests: overlap recorders fed by real
handlers, and polling helpers with generous deadlines. (The store on each
dialect is the ``store`` fixture of ``conftest.py``.)
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Callable, Iterable

from store_support import DIALECTS as DIALECTS  # shared with the store suite

from engine import CairnQ, Task, TaskStore


class Overlap:
    """Counts handler calls running at once, per group, as real handlers report them."""

    def __init__(self) -> None:
        self.active: dict[str, int] = defaultdict(int)
        self.peak: dict[str, int] = defaultdict(int)
        self.order: list[str] = []

    def enter(self, *groups: str) -> None:
        for group in groups:
            self.active[group] += 1
            self.peak[group] = max(self.peak[group], self.active[group])

    def leave(self, *groups: str) -> None:
        for group in groups:
            self.active[group] -= 1

    async def hold(self, seconds: float, *groups: str) -> None:
        self.enter(*groups)
        try:
            await asyncio.sleep(seconds)
        finally:
            self.leave(*groups)


async def eventually(
    check: Callable[[], object], *, timeout: float = 5.0, every: float = 0.01
) -> None:
    """Poll a synchronous condition until true; fail the test after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(every)


async def finished(store: TaskStore, ids: Iterable[str], timeout_ms: int = 10_000) -> list[Task]:
    """Wait for every task to be terminal and return them in order."""
    client = CairnQ(store)
    return [await client.wait(i, timeout_ms=timeout_ms, poll_ms=20) for i in ids]


async def submit_many(store: TaskStore, name: str, count: int, **kwargs: object) -> list[str]:
    return [(await store.submit(name=name, payload={"i": i}, **kwargs)).id for i in range(count)]  # type: ignore[arg-type]
