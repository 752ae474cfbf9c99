"""Backpressure (docs/protocol-notes.md, Client): a submit to a gated queue first needs headroom.

A ``QueueGate`` is attached to a store, so a client's submit, a handler's
``ctx.submit`` and a bare ``store.submit`` all meet it. Headroom is bought in
bulk: one ``queue_depth`` probe tops up an allowance of at most 64 submits, and
the allowance is spent without further reads. The limit is therefore soft; N
producers each holding an allowance can overshoot it by up to (N - 1) * 64 rows.
"""

from __future__ import annotations

import asyncio
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import TYPE_CHECKING

from engine._errors import QueueFull
from engine._rules import at_least

if TYPE_CHECKING:
    from engine.store._base import TaskStore

#: Most submits one probe admits.
GRANT_MAX = 64
#: Pauses between probes that found no headroom: a short first look, then
#: half as long again each time, never more than two seconds.
_FIRST_PAUSE_S = 0.1
_PAUSE_GROWTH = 1.5
_LONGEST_PAUSE_S = 2.0


def _pauses() -> Iterator[float]:
    pause = _FIRST_PAUSE_S
    while True:
        yield pause
        pause = min(pause * _PAUSE_GROWTH, _LONGEST_PAUSE_S)


class QueueGate:
    """Per-queue depth limits, checked before a submit writes anything.

    Args:
        max_queue_depth: one limit for every queue (int), or limits for the named
            queues only (mapping); each an integer >= 1.
        max_queue_wait_ms: how long a submit waits for headroom before
            ``QueueFull``.

    Raises:
        ValueError: a limit is not an integer >= 1 (booleans included), or the
            wait is negative.
    """

    def __init__(
        self, max_queue_depth: int | Mapping[str, int], max_queue_wait_ms: int = 600_000
    ) -> None:
        if isinstance(max_queue_depth, Mapping):
            limits: dict[str, int] = {}
            for queue, limit in max_queue_depth.items():
                if not isinstance(queue, str) or not queue:
                    raise ValueError(f"max_queue_depth keys must be queue names, got {queue!r}")
                limits[queue] = at_least(limit, f"max_queue_depth[{queue!r}]", 1)
            self._limits: dict[str, int] | None = limits
            self._default: int | None = None
        else:
            self._limits = None
            self._default = at_least(max_queue_depth, "max_queue_depth", 1)
        if (
            isinstance(max_queue_wait_ms, bool)
            or not isinstance(max_queue_wait_ms, int)
            or max_queue_wait_ms < 0
        ):
            raise ValueError(
                f"max_queue_wait_ms must be an integer >= 0, got {max_queue_wait_ms!r}"
            )
        self.max_queue_wait_ms = max_queue_wait_ms
        # The allowance (submits admitted without a probe) is one pool for the
        # whole store, guarded by a thread lock. Refills are per event loop: each
        # loop has one asyncio lock per queue, and a count of refills done, so a
        # submit that queued behind someone else's refill uses it instead of
        # probing again.
        self._lock = threading.Lock()
        self._grants: dict[str, int] = {}
        self._refills: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, _Refill]] = (
            weakref.WeakKeyDictionary()
        )

    def limit_for(self, queue: str) -> int | None:
        """``queue``'s limit; None for a queue this gate leaves alone."""
        if self._limits is not None:
            return self._limits.get(queue)
        return self._default

    def _take_grant(self, queue: str) -> bool:
        with self._lock:
            left = self._grants.get(queue, 0)
            if left <= 0:
                return False
            self._grants[queue] = left - 1
            return True

    async def admit(self, store: TaskStore, queue: str) -> None:
        """Spend one unit of ``queue``'s allowance, refilling it (and waiting) as needed.

        Raises:
            QueueFull: still no headroom after ``max_queue_wait_ms``; the
                caller then writes nothing.
        """
        limit = self.limit_for(queue)
        if limit is None or self._take_grant(queue):
            return
        opened = time.monotonic()
        budget_s = self.max_queue_wait_ms / 1000
        refill = self._refill_for(queue)
        for pause in _pauses():
            await refill.run(lambda: self._probe(store, queue, limit))
            if self._take_grant(queue):
                return
            spent_s = time.monotonic() - opened
            if spent_s >= budget_s:
                raise QueueFull(queue, limit, int(spent_s * 1000))
            await asyncio.sleep(min(pause, budget_s - spent_s))

    def _refill_for(self, queue: str) -> _Refill:
        per_queue = self._refills.setdefault(asyncio.get_running_loop(), {})
        refill = per_queue.get(queue)
        if refill is None:
            refill = per_queue[queue] = _Refill()
        return refill

    async def _probe(self, store: TaskStore, queue: str, limit: int) -> None:
        headroom = await store.queue_depth(queue, limit)
        with self._lock:
            self._grants[queue] = min(headroom, GRANT_MAX)


class _Refill:
    """One queue's refills on one loop: a single probe at a time, shared by its waiters.

    A waiter that had to queue for the lock while another waiter's probe ran
    takes that probe as its own: the allowance it set is as fresh as any.
    """

    __slots__ = ("_done", "_lock")

    def __init__(self) -> None:
        self._lock = asyncio.Lock()
        self._done = 0

    async def run(self, probe: Callable[[], Awaitable[None]]) -> None:
        seen = self._done
        async with self._lock:
            if self._done != seen:
                return
            await probe()
            self._done += 1
