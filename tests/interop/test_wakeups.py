"""Postgres wakeups cross sides: NOTIFY from one side's writes wakes the other's waiters.

Each waiter gets a long timeout; returning well before it (the engine's waits
also say True) is only possible through a notification, since polling would
sleep the whole timeout. Before each check both listeners are proven live with
a probe round trip, so a slow listener start cannot pass for a missing wake.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from interop_support import Backend, Pair

pytestmark = [pytest.mark.peer, pytest.mark.postgres]

TIMEOUT_MS = 5_000
EARLY_S = TIMEOUT_MS / 1000 / 2  # a wake arrives in milliseconds; polling would take 5 s


@pytest.fixture
async def pg_pair(pg_dsn: str, pg_schema: str) -> AsyncIterator[Pair]:
    backend = Backend("postgres", pg_dsn, pg_schema)
    peer = backend.peer()
    await peer.connect()
    engine = backend.engine()
    try:
        await engine.connect()
        await until_listening(engine, peer)
        await until_listening(peer, engine)
        yield Pair(engine, peer)
    finally:
        await engine.close()
        await peer.close()


async def timed(wait: Awaitable[Any], write: Callable[[], Awaitable[Any]]) -> tuple[Any, float]:
    """Start ``wait``, let it settle, run ``write``; the wait's value and its duration."""
    started = time.monotonic()
    waiting = asyncio.ensure_future(wait)
    await asyncio.sleep(0.05)
    await write()
    value = await waiting
    return value, time.monotonic() - started


async def until_listening(waiter: Any, writer: Any) -> None:
    """Wait until ``waiter`` hears ``writer``'s notifications (its listener is up).

    The engine LISTENs to a channel once its process first waits for that kind
    (claim or done): both are declared first, so one pass of the listener takes
    both channels, which the probe then proves live.
    """
    queue = f"probe_{uuid.uuid4().hex[:8]}"
    await waiter.task_done_wake(f"task_{uuid.uuid4().hex}", 1)
    await waiter.claim_wake([queue], 1)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        _, took = await timed(
            waiter.claim_wake([queue], 400), lambda: writer.submit(name="probe", queue=queue)
        )
        if took < 0.3:
            return
    pytest.fail("the listener never came up")


async def test_engine_submit_wakes_a_cairnq_claim_waiter(pg_pair: Pair) -> None:
    _, took = await timed(
        pg_pair.peer.claim_wake(["jobs"], TIMEOUT_MS),
        lambda: pg_pair.engine.submit(name="job", payload={}, queue="jobs"),
    )
    assert took < EARLY_S


async def test_engine_requeue_and_retry_wake_a_cairnq_claim_waiter(pg_pair: Pair) -> None:
    engine, peer = pg_pair.engine, pg_pair.peer
    task = await peer.submit(name="job", payload={}, queue="jobs", max_attempts=1)
    await engine.claim(queues=["jobs"], worker_id="w", lease_ms=5_000)
    error = {"type": "E", "code": "e", "message": "m", "retryable": True, "details": {}}
    # max_attempts=1: the fail is final, then the retry requeues (and notifies).
    await engine.fail(task_id=task.id, worker_id="w", error=error)
    _, took = await timed(peer.claim_wake(["jobs"], TIMEOUT_MS), lambda: engine.retry(task.id))
    assert took < EARLY_S


async def test_engine_complete_wakes_a_cairnq_done_waiter(pg_pair: Pair) -> None:
    engine, peer = pg_pair.engine, pg_pair.peer
    task = await peer.submit(name="job", payload={})
    await engine.claim(queues=["default"], worker_id="w", lease_ms=5_000)
    _, took = await timed(
        peer.task_done_wake(task.id, TIMEOUT_MS),
        lambda: engine.complete(task_id=task.id, worker_id="w", result={"ok": True}),
    )
    assert took < EARLY_S
    assert (await peer.get(task.id)).result == {"ok": True}


async def test_engine_cancel_wakes_a_cairnq_done_waiter(pg_pair: Pair) -> None:
    task = await pg_pair.peer.submit(name="job", payload={})
    _, took = await timed(
        pg_pair.peer.task_done_wake(task.id, TIMEOUT_MS), lambda: pg_pair.engine.cancel(task.id)
    )
    assert took < EARLY_S


async def test_cairnq_submit_wakes_an_engine_claim_waiter(pg_pair: Pair) -> None:
    woke, took = await timed(
        pg_pair.engine.claim_wake(["jobs"], TIMEOUT_MS),
        lambda: pg_pair.peer.submit(name="job", payload={}, queue="jobs"),
    )
    assert woke is True
    assert took < EARLY_S


async def test_cairnq_complete_wakes_an_engine_done_waiter(pg_pair: Pair) -> None:
    engine, peer = pg_pair.engine, pg_pair.peer
    task = await engine.submit(name="job", payload={})
    await peer.claim(queues=["default"], worker_id="w", lease_ms=5_000)
    woke, took = await timed(
        engine.task_done_wake(task.id, TIMEOUT_MS),
        lambda: peer.complete(task_id=task.id, worker_id="w", result=None),
    )
    assert woke is True
    assert took < EARLY_S


async def test_engine_waiters_ignore_other_queues_and_tasks(pg_pair: Pair) -> None:
    # The control: a notification about something else does not end the wait.
    engine, peer = pg_pair.engine, pg_pair.peer
    watched = await engine.submit(name="job", payload={}, queue="elsewhere")
    unrelated = await engine.submit(name="job", payload={}, queue="elsewhere")
    woke, took = await timed(
        engine.claim_wake(["quiet"], 500), lambda: peer.submit(name="job", queue="jobs")
    )
    assert (woke, took >= 0.45) == (False, True)
    woke, took = await timed(
        engine.task_done_wake(watched.id, 500), lambda: peer.cancel(unrelated.id)
    )
    assert (woke, took >= 0.45) == (False, True)
