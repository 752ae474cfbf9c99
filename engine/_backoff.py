"""Retry backoff with equal jitter, as every cairnq SDK computes it."""

from __future__ import annotations

import random


def retry_delay_ms(
    attempt: int,
    *,
    base_ms: int = 1_000,
    cap_ms: int = 30_000,
    retryable: bool = True,
    rand: float | None = None,
) -> int:
    """Delay before the next attempt: uniform over ``[w/2, w)``.

    ``w = min(cap, base * 2**max(0, attempt - 1))`` where ``attempt`` is the
    post-claim attempt (1 on the first run). Permanent failures and a non-positive
    base get 0.
    """
    if not retryable or base_ms <= 0:
        return 0
    window: int = min(cap_ms, base_ms << max(0, attempt - 1))
    floor_half = window // 2
    r = random.random() if rand is None else rand
    return int(floor_half + int(r * (window - floor_half)))
