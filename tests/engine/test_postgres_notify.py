"""LISTEN/NOTIFY wakeups: other processes' writes wake this store's waiters.

Writers here deliberately bypass this process's in-process signal hub (a raw
psycopg connection, or a subprocess running the engine), so a wakeup can only
have come through the database's trigger and the store's listener.
"""

from __future__ import annotations

import asyncio
import gc
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator
from pathlib import Path

import psycopg
import pytest

from engine import PostgresStore, WatchSignal


@pytest.fixture
async def store(pg_dsn: str, pg_schema: str) -> AsyncIterator[PostgresStore]:
    s = PostgresStore(pg_dsn, schema=pg_schema, max_size=2)
    await s.connect()
    await wait_for_listener(s)
    yield s
    await s.close()


async def wait_for_listener(store: PostgresStore, timeout_s: float = 8.0) -> int:
    """The listener's backend pid once it LISTENs to both channels (no public window on it).

    A store LISTENs to a channel once its process first waits for that kind:
    both are declared here first (a claim wake and a done wake, at once over).
    """
    await store.claim_wake(["declared"], 1)
    await store.task_done_wake("task_declared", 1)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        listener = store._listener
        if (
            listener is not None
            and listener.backend_pid is not None
            and listener.listening == {"queued", "done"}
        ):
            return listener.backend_pid
        await asyncio.sleep(0.02)
    raise AssertionError("listener never came up")


def raw(dsn: str, schema: str, sql: str) -> None:
    """A write from outside this process's signal hub."""
    with psycopg.connect(dsn, autocommit=True, options=f"-c search_path={schema}") as conn:
        conn.execute(sql)  # type: ignore[arg-type]


INSERT = (
    "insert into cairnq_tasks (id, name, queue, status, payload, run_at_ms, created_at_ms,"
    " updated_at_ms) values ('{id}', 'n', '{queue}', 'queued', '{{}}', 0, 0, 0)"
)


async def timed_wake(waiter: asyncio.Task[bool]) -> tuple[bool, float]:
    start = time.monotonic()
    woke = await waiter
    return woke, time.monotonic() - start


async def test_claim_wake_from_another_writer(
    store: PostgresStore, pg_dsn: str, pg_schema: str
) -> None:
    waiter = asyncio.create_task(store.claim_wake(["q"], 5_000))
    await asyncio.sleep(0.05)
    start = time.monotonic()
    await asyncio.to_thread(raw, pg_dsn, pg_schema, INSERT.format(id="task_x1", queue="q"))
    assert await waiter is True
    assert time.monotonic() - start < 2.5  # far below the 5 s timeout


async def test_claim_wake_ignores_other_queues_and_claims(
    store: PostgresStore, pg_dsn: str, pg_schema: str
) -> None:
    # Queue names unique to this test: NOTIFY channels are database-wide and
    # other tests may be writing to other schemas of the same database.
    mine, other = f"{pg_schema}_q", f"{pg_schema}_other"
    waiter = asyncio.create_task(store.claim_wake([mine], 400))
    await asyncio.sleep(0.05)
    await asyncio.to_thread(raw, pg_dsn, pg_schema, INSERT.format(id="task_x2", queue=other))
    # A claim (-> running) never notifies.
    await asyncio.to_thread(
        raw, pg_dsn, pg_schema, "update cairnq_tasks set status = 'running' where id = 'task_x2'"
    )
    assert await waiter is False


async def test_task_done_wake_from_another_writer(
    store: PostgresStore, pg_dsn: str, pg_schema: str
) -> None:
    task = await store.submit(name="n")
    waiter = asyncio.create_task(store.task_done_wake(task.id, 5_000))
    await asyncio.sleep(0.05)
    start = time.monotonic()
    await asyncio.to_thread(
        raw,
        pg_dsn,
        pg_schema,
        f"update cairnq_tasks set status = 'canceled' where id = '{task.id}'",
    )
    assert await waiter is True
    assert time.monotonic() - start < 2.5


async def test_watch_sees_notifications(store: PostgresStore, pg_dsn: str, pg_schema: str) -> None:
    seen: list[WatchSignal] = []
    unsubscribe = store.watch(seen.append)
    try:
        await asyncio.to_thread(raw, pg_dsn, pg_schema, INSERT.format(id="task_x3", queue="w"))
        await asyncio.to_thread(
            raw,
            pg_dsn,
            pg_schema,
            "update cairnq_tasks set status = 'failed' where id = 'task_x3'",
        )
        deadline = time.monotonic() + 3
        want = [WatchSignal("queued", queue="w"), WatchSignal("done", task_id="task_x3")]
        while time.monotonic() < deadline and not all(w in seen for w in want):
            await asyncio.sleep(0.02)
        assert all(w in seen for w in want), seen
    finally:
        unsubscribe()


async def test_own_commits_are_announced_once(
    store: PostgresStore, pg_dsn: str, pg_schema: str
) -> None:
    # The store signals its own commits in-process (a completion with its row);
    # the trigger's NOTIFY of the same commit is an echo the listener drops. A
    # write from outside still comes through. Notifications reach a listener
    # in commit order, so once the outside write's signal is seen, the echoes
    # of the earlier writes have been handled too.
    mine, outside = f"{pg_schema}_own", f"{pg_schema}_outside"
    seen: list[WatchSignal] = []
    unsubscribe = store.watch(seen.append)
    try:
        task = await store.submit(name="n", queue=mine)
        (claimed,) = await store.claim(queues=[mine], worker_id="w")
        await store.complete(task_id=claimed.id, worker_id="w", result=1)
        await asyncio.to_thread(raw, pg_dsn, pg_schema, INSERT.format(id="task_x9", queue=outside))
        sentinel = WatchSignal("queued", queue=outside)
        deadline = time.monotonic() + 5
        while sentinel not in seen and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        assert sentinel in seen
        assert seen.count(WatchSignal("queued", queue=mine)) == 1
        assert seen.count(WatchSignal("done", task_id=task.id)) == 1
    finally:
        unsubscribe()


async def test_a_closed_connection_is_no_longer_own(pg_dsn: str, pg_schema: str) -> None:
    # The pid of a closed connection may be handed to another client's backend:
    # it must stop counting as this process's writer.
    store = PostgresStore(pg_dsn, schema=pg_schema, max_size=1)
    await store.connect()
    conn = await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True)
    pid = conn.info.backend_pid
    store.signals.add_own_writer(pid, lambda: not conn.closed)
    assert store.signals.is_own_writer(pid)
    await conn.close()
    assert not store.signals.is_own_writer(pid)
    # Registrations of connections closed since are dropped as more arrive.
    closed = {100_000 + i: False for i in range(200)}
    for fake_pid in closed:
        store.signals.add_own_writer(fake_pid, lambda p=fake_pid: closed[p])
    assert len(store.signals._own_writers) < 100
    await store.close()


SUBMITTER = textwrap.dedent(
    """
    import asyncio, sys
    sys.path.insert(0, {root!r})
    from engine import PostgresStore

    async def main():
        store = PostgresStore(sys.argv[1], schema=sys.argv[2], max_size=1)
        await store.connect()
        await store.submit(name="from-elsewhere", queue="proc")
        await store.close()

    asyncio.run(main())
    """
)


async def test_engine_in_another_process_wakes_claimer(
    store: PostgresStore, pg_dsn: str, pg_schema: str
) -> None:
    script = SUBMITTER.format(root=str(Path(__file__).resolve().parents[2]))
    waiter = asyncio.create_task(store.claim_wake(["proc"], 8_000))
    proc = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", script, pg_dsn, pg_schema],
        capture_output=True,
        timeout=30,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    assert await waiter is True
    (claimed,) = await store.claim(queues=["proc"], worker_id="w")
    assert claimed.name == "from-elsewhere"


async def test_a_process_listens_only_to_the_channels_it_waits_on(
    pg_dsn: str, pg_schema: str
) -> None:
    # Every NOTIFY on a channel a connection LISTENs to wakes its process: a
    # worker that never waits for a task, or an API process that never claims,
    # would wake for nothing at the moment the other process needs the CPU.
    # Each store below is alone in its hub (one per database and schema, kept
    # while a store of it lives): the collection frees the previous one's.
    async def listening_after(first: str) -> set[str]:
        gc.collect()
        store = PostgresStore(pg_dsn, schema=pg_schema, max_size=1)
        await store.connect()
        try:
            assert store._listener is not None
            if first == "claim":
                await store.claim_wake(["only"], 1)
            else:
                await store.task_done_wake("task_only", 1)
            deadline = time.monotonic() + 8
            while not store._listener.listening and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            await asyncio.sleep(0.1)
            return set(store._listener.listening)
        finally:
            await store.close()

    assert await listening_after("claim") == {"queued"}
    assert await listening_after("done") == {"done"}


async def test_a_wait_armed_before_its_channel_is_listened_to_looks_again(
    pg_dsn: str, pg_schema: str
) -> None:
    # A NOTIFY sent between a first wait's arming and its LISTEN taking effect
    # is missed: the waiter is woken when the LISTEN takes effect, to look
    # again, instead of sleeping out its timeout.
    store = PostgresStore(pg_dsn, schema=pg_schema, max_size=1)
    await store.connect()
    try:
        task = await store.submit(name="n")
        # Finished by another writer before this process waited for anything.
        await asyncio.to_thread(
            raw,
            pg_dsn,
            pg_schema,
            f"update cairnq_tasks set status = 'canceled' where id = '{task.id}'",
        )
        start = time.monotonic()
        assert await store.task_done_wake(task.id, 10_000) is True
        assert time.monotonic() - start < 5
    finally:
        await store.close()


async def test_listener_reconnects_after_its_backend_is_killed(
    store: PostgresStore, pg_dsn: str, pg_schema: str
) -> None:
    old_pid = await wait_for_listener(store)
    waiter = asyncio.create_task(store.claim_wake(["r"], 10_000))
    await asyncio.sleep(0.05)
    await asyncio.to_thread(raw, pg_dsn, "public", f"select pg_terminate_backend({old_pid})")
    # A dropped listener releases every waiter at once: they poll instead.
    woke, took = await timed_wake(waiter)
    assert woke is True and took < 2.0
    new_pid = await wait_for_listener(store)
    assert new_pid != old_pid
    waiter = asyncio.create_task(store.claim_wake(["r"], 5_000))
    await asyncio.sleep(0.05)
    await asyncio.to_thread(raw, pg_dsn, pg_schema, INSERT.format(id="task_x4", queue="r"))
    assert await waiter is True


async def test_polling_stays_correct_without_wakeups(pg_dsn: str, pg_schema: str) -> None:
    # Another store whose listener is stopped: claims still see everything.
    store = PostgresStore(pg_dsn, schema=pg_schema, max_size=1)
    await store.connect()
    try:
        assert store._listener is not None
        await store._listener.stop()  # simulate a refused LISTEN
        await asyncio.to_thread(raw, pg_dsn, pg_schema, INSERT.format(id="task_x5", queue="p"))
        (claimed,) = await store.claim(queues=["p"], worker_id="w")
        assert claimed.id == "task_x5"
    finally:
        await store.close()
