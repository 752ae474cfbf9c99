"""Wakeups from other connections' commits on a SQLite file.

The in-process hub (``_signals``) only hears writes made in this process; a
worker or waiter in another process would see new work at its next poll (500 ms
by default). ``PRAGMA data_version`` tells, in one inline read of ~10 µs,
whether any *other* connection committed since the last look. One ticker per
event loop reads it every ``TICK_S`` while someone sleeps and wakes every
sleeper when it changed. It is read on the store's writer connection, whose own
commits never change it: writes through this store already signal in-process.

A wake only ends a sleep early (the sleeper re-checks what it waits for); it
never replaces the timeout, so a missed or spurious wake costs nothing but one
poll.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

#: How often a ticker looks; bounds the cross-process wakeup latency.
TICK_S = 0.015


class CommitWatch:
    """Sleepers of one event loop waiting for another connection's commit.

    Args:
        read_version: the current ``data_version``, or None when it cannot be
            read right now (the connection is busy elsewhere; try next tick).
    """

    def __init__(self, read_version: Callable[[], int | None]) -> None:
        self._read = read_version
        self._sleepers: set[asyncio.Future[None]] = set()
        self._ticker: asyncio.Future[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def next_commit(self) -> asyncio.Future[None]:
        """A future resolved at the next foreign commit seen; ``forget`` it after use."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._sleepers.add(future)
        if self._ticker is None:
            self._loop = asyncio.get_running_loop()
            self._ticker = asyncio.ensure_future(self._tick(self._read()))
        return future

    def close(self) -> None:
        """Wake every sleeper and stop the ticker (the store is closing).

        Safe from any thread: the watch's own loop does the work. A loop that
        is already closed has nothing left to run, so nothing is left pending.
        """
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self._stop()
        else:
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(self._stop)

    def _stop(self) -> None:
        woken, self._sleepers = self._sleepers, set()
        for future in woken:
            if not future.done():
                future.set_result(None)
        if self._ticker is not None:
            self._ticker.cancel()

    def forget(self, future: asyncio.Future[None]) -> None:
        """Stop waiting on ``future`` (the sleep ended for another reason)."""
        self._sleepers.discard(future)
        future.cancel()

    async def _tick(self, seen: int | None) -> None:
        try:
            while self._sleepers:
                await asyncio.sleep(TICK_S)
                version = self._read()
                if version is None:
                    continue
                if seen is not None and version != seen:
                    woken, self._sleepers = self._sleepers, set()
                    for future in woken:
                        if not future.done():
                            future.set_result(None)
                seen = version
        finally:
            self._ticker = None
