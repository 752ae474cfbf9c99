"""The console's clock, injectable so ages and countdowns are stable in snapshots.

Everything on screen that depends on "now" (ages, "due in", lease left, the
Inspector's notion of due) reads the app's clock, never ``time.time`` directly.
"""

from __future__ import annotations

import time
from collections.abc import Callable

#: Epoch milliseconds.
Clock = Callable[[], int]


def system_clock() -> int:
    """The wall clock in epoch ms."""
    return int(time.time() * 1000)


class FixedClock:
    """A clock that only moves when told to (tests, snapshots, screenshots)."""

    def __init__(self, now_ms: int) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms
