"""CairnQ's waits (docs/protocol-notes.md, "Client"), TaskTimeout messages, call,
watch and the registry of waits in progress, on both dialects.

The test plays the worker through the store's own claim/complete where a real
worker would make timing hard to control.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pytest
from worker_support import eventually

from engine import (
    CairnQ,
    TaskCanceled,
    TaskDef,
    TaskFailed,
    TaskStore,
    TaskTimeout,
    WatchSignal,
    Worker,
    active_waits,
)
from engine.store.postgres import PostgresStore
from engine.store.sqlite import SQLiteStore

T = TypeVar("T")


@pytest.fixture
def client(store: TaskStore) -> CairnQ:
    return CairnQ(store)


async def claim_one(store: TaskStore, name: str) -> str:
    (task,) = await store.claim(queues=["default"], worker_id="worker_test", names=[name])
    return task.id


async def test_call_returns_result_or_raises(client: CairnQ, store: TaskStore) -> None:
    worker = Worker(store, ["default"], poll_interval_ms=20, retry_backoff_ms=0)
    add: TaskDef[dict, int] = TaskDef("add")

    @worker.task(add)
    async def _add(ctx, payload):
        return payload["a"] + payload["b"]

    @worker.task
    async def broken(ctx):
        raise ValueError("nope")

    @worker.task
    async def sleepy(ctx):
        while not await ctx.canceled():
            await asyncio.sleep(0.01)
        return "cooperated"

    async with worker.background():
        assert await client.call(add, {"a": 2, "b": 3}) == 5
        with pytest.raises(TaskFailed) as failed:
            await client.call("broken", max_attempts=1)
        assert failed.value.code == "handler_error" and failed.value.message == "nope"
        task = await client.submit("sleepy")
        await eventually(lambda: bool(worker.snapshot().calls))
        await client.cancel(task.id)
        worker.stop()
    done = await client.wait(task.id, timeout_ms=2_000)
    assert done.status == "canceled" and done.result is None  # cancel wins over the return


async def test_call_raises_task_canceled(client: CairnQ, store: TaskStore) -> None:
    async def cancel_soon() -> None:
        await eventually(lambda: any(w.kind == "call" for w in active_waits()))
        (wait,) = [w for w in active_waits() if w.kind == "call"]
        assert wait.task_id is not None
        await store.cancel(wait.task_id)

    canceller = asyncio.ensure_future(cancel_soon())
    with pytest.raises(TaskCanceled):
        await client.call("nobody.handles.this", timeout_ms=5_000)
    await canceller


async def test_wait_wakes_on_in_process_completion(client: CairnQ, store: TaskStore) -> None:
    task = await client.submit("manual")
    task_id = await claim_one(store, "manual")
    waiter = asyncio.ensure_future(client.wait(task.id, poll_ms=5_000, max_poll_ms=5_000))
    await eventually(lambda: any(w.task_id == task.id for w in active_waits()))
    (entry,) = [w for w in active_waits() if w.task_id == task.id]
    assert entry.kind == "wait" and entry.last_status == "running"
    await store.complete(task_id=task_id, worker_id="worker_test", result="ok")
    # The 5 s poll would time this out: only the completion signal can end it.
    done = await asyncio.wait_for(waiter, 2)
    assert done.result == "ok"
    assert not any(w.task_id == task.id for w in active_waits())


async def test_wait_by_key_follows_replace(client: CairnQ, store: TaskStore) -> None:
    first = await client.submit("keyed", {"v": 1}, key="report:7")
    waiter = asyncio.ensure_future(
        client.wait_by_key("report:7", timeout_ms=10_000, poll_ms=20, max_poll_ms=40)
    )
    await eventually(lambda: any(w.key == "report:7" and w.beats for w in active_waits()))
    second = await client.submit("keyed", {"v": 2}, key="report:7", conflict="replace")
    assert (await client.get(first.id)).status == "canceled"  # type: ignore[union-attr]

    def moved() -> bool:
        return any(w.key == "report:7" and w.task_id == second.id for w in active_waits())

    await eventually(moved)
    (entry,) = [w for w in active_waits() if w.key == "report:7"]
    assert entry.kind == "wait_by_key" and entry.replace_count == 1
    task_id = await claim_one(store, "keyed")
    assert task_id == second.id
    await store.complete(task_id=task_id, worker_id="worker_test", result="v2")
    done = await asyncio.wait_for(waiter, 5)
    assert done.id == second.id and done.result == "v2"


async def test_wait_by_key_waits_for_a_key_that_does_not_exist_yet(client: CairnQ) -> None:
    waiter = asyncio.ensure_future(client.wait_by_key("later", timeout_ms=5_000, poll_ms=20))
    await eventually(lambda: any(w.key == "later" and w.beats >= 2 for w in active_waits()))
    assert [w.task_id for w in active_waits() if w.key == "later"] == [None]
    task = await client.submit("x", key="later")
    await client.cancel(task.id)
    done = await asyncio.wait_for(waiter, 5)
    assert done.id == task.id and done.status == "canceled"


async def test_timeout_messages_say_why(client: CairnQ, store: TaskStore) -> None:
    async def timeout_of(**kwargs: object) -> TaskTimeout:
        with pytest.raises(TaskTimeout) as info:
            if "key" in kwargs:
                await client.wait_by_key(str(kwargs["key"]), timeout_ms=60, poll_ms=20)
            else:
                await client.wait(str(kwargs["task_id"]), timeout_ms=60, poll_ms=20)
        return info.value

    never = await client.submit("resize", queue="images")
    err = await timeout_of(task_id=never.id)
    assert "never claimed" in str(err) and "'resize'" in str(err) and "'images'" in str(err)
    assert "is a worker running" in str(err)
    assert err.task is not None and err.task.id == never.id and err.timeout_ms == 60

    delayed = await client.submit("later", delay_ms=60_000)
    assert "due at" in str(await timeout_of(task_id=delayed.id))

    running = await client.submit("busy")
    await claim_one(store, "busy")
    assert "still running on worker worker_test" in str(await timeout_of(task_id=running.id))
    await client.cancel(running.id)
    assert "cancel pending" in str(await timeout_of(task_id=running.id))

    missing = await timeout_of(task_id="task_00000000000000000000000000")
    assert "no such task" in str(missing) and missing.task is None

    by_key = await timeout_of(key="nothing-here")
    assert by_key.key == "nothing-here" and by_key.task_id == "nothing-here"
    assert "does not resolve" in str(by_key)


async def test_wait_rejects_bad_arguments(client: CairnQ) -> None:
    with pytest.raises(ValueError):
        await client.wait("task_x", timeout_ms=-1)
    with pytest.raises(ValueError):
        await client.wait("task_x", poll_ms=0)
    with pytest.raises(ValueError):
        await client.wait("")


async def test_ctx_wait_is_registered_and_returns_child(store: TaskStore) -> None:
    worker = Worker(store, ["default"], poll_interval_ms=20, concurrency=2)
    kinds = []

    @worker.task
    async def parent(ctx):
        child = await ctx.submit("child", {"n": 4})
        done = await ctx.wait(child.id, timeout_ms=5_000)
        kinds.extend(w.kind for w in active_waits())
        return {"child": done.result, "lineage": [child.parent_id, child.root_id]}

    @worker.task
    async def child(ctx, payload):
        kinds.extend(w.kind for w in active_waits())
        return payload["n"] * 10

    client = CairnQ(store)
    async with worker.background():
        task = await client.submit("parent", correlation_id="corr-1")
        done = await client.wait(task.id, timeout_ms=5_000)
    assert done.result == {"child": 40, "lineage": [task.id, task.id]}
    assert "ctx.wait" in kinds
    (child_row,) = await client.list(name="child")
    assert child_row.correlation_id == "corr-1"


async def test_watch_delivers_queued_done_and_poll(client: CairnQ, store: TaskStore) -> None:
    got: list[WatchSignal] = []
    unsubscribe = client.watch(got.append, queues=["wanted"], poll_ms=30)
    try:
        await client.submit("a", queue="ignored")
        task = await client.submit("a", queue="wanted")
        await client.cancel(task.id)
        await eventually(lambda: any(s.reason == "poll" for s in got))
    finally:
        unsubscribe()
    reasons = [(s.reason, s.queue, s.task_id) for s in got if s.reason != "poll"]
    assert ("queued", "wanted", None) in reasons
    assert ("done", None, task.id) in reasons
    assert all(q != "ignored" for _, q, _ in reasons)
    count = len(got)
    await asyncio.sleep(0.1)
    await client.submit("a", queue="wanted")
    assert len(got) == count  # unsubscribed: no more signals, no more ticks


class StopRecorder:
    """A watch consumer that records any signal arriving after its stop returned."""

    def __init__(self) -> None:
        self.stopped = False
        self.late: list[WatchSignal] = []
        self.stop: Callable[[], None] = lambda: None

    def __call__(self, sig: WatchSignal) -> None:
        if self.stopped:
            self.late.append(sig)

    def stop_now(self) -> None:
        self.stop()
        self.stopped = True


def second_handle(store: TaskStore, request: pytest.FixtureRequest, tmp_path: Path) -> TaskStore:
    """Another handle on the database ``store`` uses (the fixtures' file or schema)."""
    if store.dialect == "sqlite":
        return SQLiteStore(tmp_path / "tasks.db")
    dsn = request.getfixturevalue("pg_dsn")
    return PostgresStore(dsn, schema=request.getfixturevalue("pg_schema"), max_size=2)


async def loop_turns(count: int = 5) -> None:
    for _ in range(count):
        await asyncio.sleep(0)


async def test_watch_stop_is_final_for_a_tick_already_due(client: CairnQ) -> None:
    loop = asyncio.get_running_loop()
    for _ in range(50):
        recorder = StopRecorder()
        recorder.stop = client.watch(recorder, poll_ms=1)
        await asyncio.sleep(0)  # the ticker starts and arms its 1 ms sleep
        # Block the loop past that sleep, then stop from a callback that runs in
        # the same loop turn as the tick's timer: the tick has woken up, its next
        # step is queued, and only then does stop run.
        time.sleep(0.003)
        loop.call_later(0, recorder.stop_now)
        await loop_turns()
        await asyncio.sleep(0.005)  # longer than poll_ms: a live ticker would tick again
        assert recorder.stopped and recorder.late == []


async def test_watch_stop_is_final_for_a_signal_from_another_thread(
    client: CairnQ, store: TaskStore, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    # A second handle on the same database, driven by its own loop on a thread:
    # its submits reach this loop's watch through call_soon_threadsafe.
    other = asyncio.new_event_loop()
    thread = threading.Thread(target=other.run_forever, daemon=True)
    thread.start()

    def on_other(coro: Coroutine[Any, Any, T]) -> T:
        # Blocks this loop on purpose: the handed-over signal stays queued here.
        return asyncio.run_coroutine_threadsafe(coro, other).result(timeout=30)

    second = second_handle(store, request, tmp_path)
    on_other(second.connect())
    try:
        for _ in range(50):
            recorder = StopRecorder()
            recorder.stop = client.watch(recorder, poll_ms=60_000)
            on_other(second.submit(name="from-thread", payload={}))
            recorder.stop_now()
            await loop_turns()
            assert recorder.late == []
    finally:
        on_other(second.close())
        other.call_soon_threadsafe(other.stop)
        thread.join(timeout=30)
        other.close()
