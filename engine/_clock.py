"""The application clock: epoch milliseconds, as every ``*_ms`` column holds them."""

from __future__ import annotations

import math
import time


def now_ms() -> int:
    """Epoch ms, floored (PROTOCOL.md §2.1: SQLite binds this clock per statement)."""
    return math.floor(time.time() * 1000)
