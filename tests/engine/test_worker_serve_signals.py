"""``Worker.serve()`` and its stop signals, on both dialects.

The first SIGTERM (or SIGINT) stops claiming and lets the calls in flight
finish; a handler that never returns kept the process waiting for ever. The
second signal gives up on the calls still in their handler: the process exits
(also past a handler that swallows its cancellation), and their tasks stay
``running`` under their leases for lease recovery to take.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from worker_support import DIALECTS, eventually, finished

from engine import PostgresStore, SQLiteStore, TaskStore

SERVE = textwrap.dedent(
    """
    import asyncio, sys, time
    from engine import Worker

    max_run_ms = int(sys.argv[3]) or None
    options = dict(queues=["default"], concurrency=4, poll_interval_ms=20, max_run_ms=max_run_ms)
    if sys.argv[1] == "sqlite":
        worker = Worker.sqlite(sys.argv[2], **options)
    else:
        worker = Worker.postgres(sys.argv[2], schema=sys.argv[4], **options)

    @worker.task
    def hang_def(ctx):
        time.sleep(3600)

    @worker.task
    async def hang_async(ctx):
        await asyncio.Event().wait()

    @worker.task
    async def hang_async_raising(ctx):
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            raise RuntimeError("interrupted") from None  # must not fail the task

    @worker.task
    async def hang_async_stubborn(ctx):
        while True:  # swallows every cancellation: only the process's end stops it
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                pass

    @worker.task
    async def quick(ctx, payload):
        return payload["i"] * 2

    print(worker.worker_id, flush=True)
    worker.serve()
    print("served", flush=True)
    """
)


# Without max_run_ms nothing else ever ends the calls; with a ceiling far off,
# the handlers run under its watch (a different wait) when the signals come.
@pytest.mark.parametrize("max_run_ms", [0, 3_600_000], ids=["no_max_run", "max_run_1h"])
@pytest.mark.parametrize("dialect", DIALECTS)
async def test_second_signal_gives_up_on_hung_handlers(
    dialect: str, max_run_ms: int, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    store: TaskStore
    if dialect == "sqlite":
        target, extra = str(tmp_path / "serve.db"), []
        store = SQLiteStore(target)
    else:
        target = request.getfixturevalue("pg_dsn")
        schema = request.getfixturevalue("pg_schema")
        extra = [schema]
        store = PostgresStore(target, schema=schema)
    await store.connect()
    stderr_path = tmp_path / "stderr.txt"
    try:
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
        with stderr_path.open("w") as stderr:
            proc = subprocess.Popen(
                [sys.executable, "-c", SERVE, dialect, target, str(max_run_ms), *extra],
                env=env,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
            )
        try:
            good = (await store.submit(name="quick", payload={"i": 21})).id
            (done,) = await finished(store, [good], timeout_ms=60_000)
            assert (done.status, done.result) == ("succeeded", 42)

            hung = [
                (await store.submit(name=n)).id
                for n in ("hang_def", "hang_async", "hang_async_raising", "hang_async_stubborn")
            ]

            async def claimed() -> bool:
                rows = [await store.get(i) for i in hung]
                return all(r is not None and r.status == "running" for r in rows)

            deadline = asyncio.get_running_loop().time() + 60
            while not await claimed():
                assert asyncio.get_running_loop().time() < deadline, "hung tasks never claimed"
                await asyncio.sleep(0.02)

            # First signal: a warm stop, which waits for the hung handlers.
            proc.send_signal(signal.SIGTERM)
            await eventually(lambda: "4 call(s) in flight" in stderr_path.read_text(), timeout=60)
            late = (await store.submit(name="quick", payload={"i": 1})).id
            assert proc.poll() is None

            # Second signal: a cold stop.
            proc.send_signal(signal.SIGTERM)
            out, _ = await asyncio.to_thread(proc.communicate, None, 60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode == 0, stderr_path.read_text()
        worker_id, served = out.split()
        assert served == "served"
        errors = stderr_path.read_text()
        assert "SIGTERM: stopping, 4 call(s) in flight; send the signal again" in errors
        # The handler that swallowed its cancellation is left behind, saying so.
        assert "1 handler(s) ignored their cancellation" in errors
        assert "Traceback" not in errors

        # Given up on, not failed: each stays running under this worker's lease.
        for task_id in hung:
            row = await store.get(task_id)
            assert row is not None
            assert (row.status, row.attempt, row.worker_id) == ("running", 1, worker_id)
            assert row.error is None
            assert row.lease_until_ms is not None
        late_row = await store.get(late)
        assert late_row is not None and late_row.status == "queued"  # never claimed
        good_row = await store.get(good)
        assert good_row is not None and good_row.status == "succeeded"
    finally:
        await store.close()
