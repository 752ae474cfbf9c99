"""Task and worker ids: a prefix plus a ULID (48-bit ms time, 80 random bits)."""

from __future__ import annotations

import os
import time

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def ulid(now_ms: int | None = None) -> str:
    """A new ULID as 26 Crockford base32 digits, most significant first."""
    ms = int(time.time() * 1000) if now_ms is None else now_ms
    value = (ms << 80) | int.from_bytes(os.urandom(10), "big")
    digits = []
    for _ in range(26):
        digits.append(_CROCKFORD[value & 31])
        value >>= 5
    return "".join(reversed(digits))


def new_task_id(now_ms: int | None = None) -> str:
    """``task_`` + ULID."""
    return "task_" + ulid(now_ms)


def new_worker_id() -> str:
    """``worker_`` + ULID, new for every worker instance."""
    return "worker_" + ulid()
