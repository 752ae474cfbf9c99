"""What wakes the worker's claim loop around a ``call()``, on both dialects.

A call is one submit, one claim, one settlement. The claim that its submit's
signal wakes should be the only poll it causes: the slot its end frees cannot
make anything claimable when the loop last found nothing due, so the loop
keeps sleeping (before, every call ended with a second poll that found
nothing). A signal that announced nothing claimable (a delayed task) must not
cost the next task its wake.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from engine import CairnQ, TaskStore, Worker
from engine.store._signals import Claimer

#: Far above any test's length: only signals and pokes make the loop poll.
NO_IDLE_POLL_MS = 600_000


def own_queue() -> str:
    """A queue no one else uses: Postgres NOTIFY channels are database-wide, and
    other tests submitting to "default" in other schemas would wake the worker."""
    return f"wakes_{uuid.uuid4().hex[:10]}"


async def test_one_poll_per_call_when_idle(store: TaskStore) -> None:
    client, queue = CairnQ(store), own_queue()
    worker = Worker(store, [queue], concurrency=8, poll_interval_ms=NO_IDLE_POLL_MS)

    async def echo(ctx: Any, payload: Any) -> Any:
        return payload

    worker.register("echo", echo)
    async with worker.background():
        assert await client.call("echo", {"i": -1}, queue=queue, timeout_ms=20_000) == {"i": -1}
        before = worker.snapshot().polls
        calls = 6
        for i in range(calls):
            assert await client.call("echo", {"i": i}, queue=queue, timeout_ms=20_000) == {"i": i}
        polls = worker.snapshot().polls - before
    # One claim per call; the last call's claim may be followed by at most one
    # more poll in flight when the snapshot is taken. Before: two per call.
    assert calls <= polls <= calls + 1, polls


async def test_no_result_calls_poll_once_each(store: TaskStore) -> None:
    # The same for handlers returning nothing: their completion rides on a
    # claim session when the loop may find work, else it is written alone.
    client, queue = CairnQ(store), own_queue()
    worker = Worker(store, [queue], concurrency=8, poll_interval_ms=NO_IDLE_POLL_MS)

    async def nothing(ctx: Any, payload: Any) -> None:
        return None

    worker.register("nothing", nothing)
    async with worker.background():
        assert await client.call("nothing", queue=queue, timeout_ms=20_000) is None
        before = worker.snapshot().polls
        calls = 6
        for _ in range(calls):
            assert await client.call("nothing", queue=queue, timeout_ms=20_000) is None
        polls = worker.snapshot().polls - before
    assert calls <= polls <= calls + 1, polls


async def test_a_signal_about_a_delayed_task_does_not_cost_the_next_wake(
    store: TaskStore,
) -> None:
    client, queue = CairnQ(store), own_queue()
    worker = Worker(store, [queue], concurrency=2, poll_interval_ms=NO_IDLE_POLL_MS)

    async def echo(ctx: Any, payload: Any) -> Any:
        return payload

    worker.register("echo", echo)
    async with worker.background():
        assert await client.call("echo", 0, queue=queue, timeout_ms=20_000) == 0
        for i in range(3):
            # Its insert signals the queue, but nothing is due: the woken
            # claim finds nothing; the next task's signal still gets it run.
            await client.submit("echo", i, queue=queue, delay_ms=3_600_000)
            assert await client.call("echo", i + 1, queue=queue, timeout_ms=20_000) == i + 1


async def test_an_in_process_call_reads_nothing_after_its_handler(store: TaskStore) -> None:
    # The completion hands the committed row to a waiter in this process, for
    # handlers returning a value and for those returning nothing alike, so
    # call() needs no read of its task (on Postgres the NOTIFY echo of the
    # completion is dropped, and cannot wake the waiter to read it first).
    client, queue = CairnQ(store), own_queue()
    worker = Worker(store, [queue], concurrency=8, poll_interval_ms=NO_IDLE_POLL_MS)
    reads: list[str] = []
    get, get_status = store.get, store.get_status

    async def counted_get(task_id: str) -> Any:
        reads.append(task_id)
        return await get(task_id)

    async def counted_status(task_id: str) -> Any:
        reads.append(task_id)
        return await get_status(task_id)

    async def value(ctx: Any, payload: Any) -> Any:
        return payload

    async def nothing(ctx: Any, payload: Any) -> None:
        return None

    worker.register("value", value)
    worker.register("nothing", nothing)
    async with worker.background():
        assert await client.call("value", 0, queue=queue, timeout_ms=20_000) == 0
        store.get, store.get_status = counted_get, counted_status  # type: ignore[method-assign]
        try:
            for i in range(4):
                assert await client.call("value", i, queue=queue, timeout_ms=20_000) == i
                assert await client.call("nothing", i, queue=queue, timeout_ms=20_000) is None
        finally:
            del store.get, store.get_status
    assert reads == []


async def test_a_signal_after_the_first_claim_waits_for_the_claimer(store: TaskStore) -> None:
    # A worker's first poll looks, finds nothing, and only then arms its wake:
    # a task submitted in between must not be lost for the whole idle sleep.
    # The claim itself registers its queues, so the signal is kept until the
    # claimer arms. (Before, only the first arm did: on Postgres the NOTIFY
    # echo of the submit came to the rescue, and once echoes were dropped a
    # worker's very first task could wait out poll_interval_ms.)
    queue = own_queue()
    assert await store.claim(queues=[queue], worker_id="w") == []
    await store.submit(name="n", queue=queue)
    assert await store.claim_wake([queue], 20_000) is True


async def test_a_signal_that_woke_one_worker_still_wakes_another_that_was_claiming(
    store: TaskStore,
) -> None:
    # Two workers of one process share a queue, each with names of its own.
    # Worker A sleeps, armed; worker B's claim has looked and found nothing
    # when a task for B arrives: its signal wakes A (who cannot run it), and B
    # arms only after. B must still wake for it. (Before, a signal was kept
    # for later only when nobody waited, and then for the first claimer to
    # arm: B slept through its whole poll interval with its task queued.)
    client, queue = CairnQ(store), own_queue()
    a = Worker(store, [queue], concurrency=1, poll_interval_ms=NO_IDLE_POLL_MS)
    b = Worker(store, [queue], concurrency=1, poll_interval_ms=NO_IDLE_POLL_MS)

    async def echo(ctx: Any, payload: Any) -> Any:
        return payload

    a.register("for_a", echo)
    b.register("for_b", echo)
    claim_session = store.claim_session
    submitted: list[str] = []

    async def then_submit(**kwargs: Any) -> Any:
        out = await claim_session(**kwargs)
        if kwargs["worker_id"] == b.worker_id and not submitted:
            # B's look is over; its loop has not armed its wake yet.
            submitted.append((await client.submit("for_b", "b", queue=queue)).id)
        return out

    async with a.background():
        # A's first poll found nothing: it sleeps, armed, from here on.
        assert await client.call("for_a", "a", queue=queue, timeout_ms=20_000) == "a"
        store.claim_session = then_submit  # type: ignore[method-assign]
        try:
            async with b.background():
                while not submitted:
                    await asyncio.sleep(0.005)
                done = await client.wait(submitted[0], timeout_ms=20_000)
        finally:
            del store.claim_session
    assert done.status == "succeeded" and done.result == "b"


async def test_every_claimer_that_had_not_looked_since_a_signal_wakes_for_it(
    store: TaskStore,
) -> None:
    # A worker hands its Claimer to its claims and its claim wakes: a signal
    # after a claimer's last look fires that claimer's next wake, however
    # many other claimers it woke or fired first.
    queue = own_queue()
    first, second = Claimer(), Claimer()

    async def one(draw: Any) -> Any:
        return await draw(None, 1)

    for claimer in (first, second):
        await store.claim_session(
            queues=[queue], worker_id="w", names=None, plan=one, claimer=claimer
        )
    await store.submit(name="n", queue=queue)
    for claimer in (first, second):
        assert await store.claim_wake([queue], 20_000, claimer=claimer) is True
    # (That a signal fires each claimer's wake only once is the hub's test,
    # test_armed_wakes: here a Postgres LISTEN taking effect may fire it again.)
