"""Plain-function handlers that hang past ``max_run_ms`` (issue 20.5), on both dialects.

A ``def`` handler cannot be interrupted: the worker gives up on the call, but
the function runs on in its thread. That thread must cost only its own call:
later ``def`` and ``async def`` tasks run as usual, the abandoned threads are
visible and counted in the worker's snapshot, and neither ``run()`` nor
``serve()`` waits for them on the way out.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from worker_support import DIALECTS, eventually, finished

from engine import CairnQ, PostgresStore, TaskStore, Worker

#: More hung calls than the loop's default executor has threads (min(32, cpus + 4)),
#: which is what every later ``def`` call queued behind before the fix.
HUNG = min(32, (os.cpu_count() or 1) + 4)


async def test_hung_def_handlers_cost_only_their_own_calls(store: TaskStore) -> None:
    worker = Worker(
        store,
        ["default"],
        concurrency=HUNG + 8,
        max_run_ms=2_000,  # generous for the good calls on a loaded machine
        poll_interval_ms=20,
        retry_backoff_ms=0,
    )
    release = threading.Event()
    entered: list[str] = []

    @worker.task
    def hang(ctx, payload):
        entered.append(ctx.task_id)
        release.wait(120)  # set at the end of the test: no thread outlives it
        return "too late"

    @worker.task
    def quick(ctx, payload):
        return payload["i"] * 2

    @worker.task
    async def quick_async(ctx, payload):
        return payload["i"] * 3

    client = CairnQ(store)
    try:
        async with worker.background():
            hung = [(await client.submit("hang", {}, max_attempts=1)).id for _ in range(HUNG)]
            # Every hung call holds its thread before the good ones come.
            await eventually(lambda: len(entered) == HUNG, timeout=60)
            good = [(await client.submit("quick", {"i": i})).id for i in range(4)]
            good += [(await client.submit("quick_async", {"i": i})).id for i in range(4)]
            done_good = await finished(store, good, timeout_ms=60_000)
            assert [t.status for t in done_good] == ["succeeded"] * 8, [t.error for t in done_good]
            assert [t.result for t in done_good] == [0, 2, 4, 6, 0, 3, 6, 9]

            done_hung = await finished(store, hung, timeout_ms=60_000)
            assert {(t.status, t.error["code"]) for t in done_hung} == {
                ("failed", "handler_timeout")
            }
            # Given up on: no slot held, every thread still running and shown.
            snap = worker.snapshot()
            assert snap.concurrency_used == 0
            assert snap.abandoned_total == HUNG
            assert len(snap.abandoned_threads) == HUNG
            assert {a.name for a in snap.abandoned_threads} == {"hang"}
            assert {a.task_ids for a in snap.abandoned_threads} == {(i,) for i in hung}
            assert all(a.abandoned_at_ms >= a.started_at_ms for a in snap.abandoned_threads)

            # More good work after the abandonment: still runs.
            more = [(await client.submit("quick", {"i": i})).id for i in range(10, 14)]
            assert [t.result for t in await finished(store, more)] == [20, 22, 24, 26]

            release.set()  # the hung functions return at last: no longer abandoned
            await eventually(lambda: not worker.snapshot().abandoned_threads, timeout=30)
            assert worker.snapshot().abandoned_total == HUNG
        for task in await finished(store, hung):
            assert task.status == "failed"  # a late return changes nothing
    finally:
        release.set()


async def test_run_returns_without_waiting_for_an_abandoned_thread(store: TaskStore) -> None:
    worker = Worker(store, ["default"], max_run_ms=200, poll_interval_ms=20)
    release = threading.Event()

    @worker.task
    def hang(ctx):
        release.wait(120)

    try:
        task = await store.submit(name="hang", max_attempts=1)
        async with worker.background():
            (done,) = await finished(store, [task.id], timeout_ms=60_000)
            assert done.error["code"] == "handler_timeout"
        # background() drained and returned while the thread still hangs.
        assert len(worker.snapshot().abandoned_threads) == 1
        assert worker.snapshot().state == "stopped"
    finally:
        release.set()


SERVE = textwrap.dedent(
    """
    import sys, time
    from engine import Worker

    if sys.argv[1] == "sqlite":
        worker = Worker.sqlite(sys.argv[2], queues=["default"], max_run_ms=200,
                               poll_interval_ms=20)
    else:
        worker = Worker.postgres(sys.argv[2], queues=["default"], schema=sys.argv[3],
                                 max_run_ms=200, poll_interval_ms=20)

    @worker.task
    def hang(ctx):
        time.sleep(3600)

    worker.serve()
    print("served", flush=True)
    """
)


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_serve_exits_on_sigterm_with_abandoned_threads(
    dialect: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    if dialect == "sqlite":
        target, extra = str(tmp_path / "serve.db"), []
        store: TaskStore = await _sqlite(target)
    else:
        target = request.getfixturevalue("pg_dsn")
        schema = request.getfixturevalue("pg_schema")
        extra = [schema]
        store = PostgresStore(target, schema=schema)
        await store.connect()
    try:
        ids = [(await store.submit(name="hang", max_attempts=1)).id for _ in range(HUNG)]
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
        proc = subprocess.Popen(
            [sys.executable, "-c", SERVE, dialect, target, *extra],
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            # Every call given up on (its task failed) while its thread sleeps on.
            done = await finished(store, ids, timeout_ms=120_000)
            assert {t.error["code"] for t in done} == {"handler_timeout"}
            proc.send_signal(signal.SIGTERM)
            # Generous: the threads sleep for an hour, which the exit used to wait out.
            out, _ = await asyncio.to_thread(proc.communicate, None, 60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode == 0
        assert out.strip() == "served"
    finally:
        await store.close()


async def _sqlite(path: str) -> TaskStore:
    from engine import SQLiteStore

    store = SQLiteStore(path)
    await store.connect()
    return store
