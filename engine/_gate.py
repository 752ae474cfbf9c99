"""The backpressure gate (PROTOCOL.md §6.3): bound a queue's depth at submit time.

The gate hangs on the store, not on the client, so every submit path passes it:
``CairnQ.submit``, a worker's ``ctx.submit`` and a plain ``store.submit``. One
``queue_depth`` probe buys a grant of up to 64 submits, which is what makes the
limit soft: with N producers a queue may exceed it by as much as (N - 1) * 64.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from engine._errors import QueueFull
from engine._rules import at_least

if TYPE_CHECKING:
    from engine.store._base import TaskStore

#: Most submits one probe admits.
GRANT_MAX = 64
_BACKOFF_START_MS = 250
_BACKOFF_MAX_MS = 5_000


class QueueGate:
    """Admit submits to gated queues while they have headroom.

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
        # Grants are shared by every loop that submits through this store; the
        # in-flight probe is per loop (a future belongs to the loop that made it).
        self._lock = threading.Lock()
        self._grants: dict[str, int] = {}
        self._probes: dict[tuple[int, str], asyncio.Future[None]] = {}

    def limit_for(self, queue: str) -> int | None:
        """The depth limit of ``queue``, or None when it is not gated."""
        if self._limits is not None:
            return self._limits.get(queue)
        return self._default

    def grants(self) -> dict[str, int]:
        """Submits each queue may still make without probing (for introspection)."""
        with self._lock:
            return dict(self._grants)

    def _take_grant(self, queue: str) -> bool:
        with self._lock:
            left = self._grants.get(queue, 0)
            if left <= 0:
                return False
            self._grants[queue] = left - 1
            return True

    async def admit(self, store: TaskStore, queue: str) -> None:
        """Return once a submit to ``queue`` may proceed.

        Raises:
            QueueFull: no headroom appeared within ``max_queue_wait_ms``.
        """
        limit = self.limit_for(queue)
        if limit is None:
            return
        started = time.monotonic()
        backoff = _BACKOFF_START_MS
        while True:
            if self._take_grant(queue):
                return
            await self._shared_probe(store, queue, limit)
            if self._take_grant(queue):
                return
            waited = int((time.monotonic() - started) * 1000)
            if waited >= self.max_queue_wait_ms:
                raise QueueFull(queue, limit, waited)
            await asyncio.sleep(min(backoff, self.max_queue_wait_ms - waited) / 1000)
            backoff = min(backoff * 2, _BACKOFF_MAX_MS)

    async def _shared_probe(self, store: TaskStore, queue: str, limit: int) -> None:
        # Many submits stalled on one queue would otherwise each run a probe and
        # each take a grant of the same headroom.
        slot = (id(asyncio.get_running_loop()), queue)
        probe = self._probes.get(slot)
        if probe is None:
            probe = asyncio.ensure_future(self._probe(store, queue, limit))
            self._probes[slot] = probe
            probe.add_done_callback(lambda _: self._probes.pop(slot, None))
        await asyncio.shield(probe)

    async def _probe(self, store: TaskStore, queue: str, limit: int) -> None:
        headroom = await store.queue_depth(queue, limit)
        with self._lock:
            self._grants[queue] = min(headroom, GRANT_MAX)
