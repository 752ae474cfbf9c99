"""The application clock: epoch milliseconds, as every ``*_ms`` column holds them."""

from __future__ import annotations

import math
import time


def now_ms() -> int:
    """Epoch ms, floored (docs/protocol-notes.md, Clocks: SQLite binds this clock per statement)."""
    return math.floor(time.time() * 1000)
