"""SQLite wakeups across processes: a commit by another process ends a
``claim_wake`` / ``task_done_wake`` sleep long before its poll interval.

Another process is real here: a child Python that opens the same file and
writes when told. Bounds are generous (well under the 5 s sleeps), never tight.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from engine import SQLiteStore

POLL_MS = 5_000
# Half the sleep: a wake from the commit, not from the sleep running out (0.4 s
# failed once with four test processes on two cores).
BOUND_S = 2.5

_CHILD = """
import asyncio, sys
from engine import SQLiteStore

async def main() -> None:
    store = SQLiteStore(sys.argv[1])
    await store.connect()
    print("ready", flush=True)
    for line in sys.stdin:
        command, _, arg = line.strip().partition(" ")
        if command == "submit":
            await store.submit(name="job", queue=arg)
        elif command == "cancel":
            await store.cancel(arg)
        print("done", flush=True)
    await store.close()

asyncio.run(main())
"""


class Child:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    async def line(self) -> str:
        assert self.proc.stdout is not None
        return (await asyncio.wait_for(self.proc.stdout.readline(), 30)).decode().strip()

    def tell(self, command: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command.encode() + b"\n")


@pytest.fixture
async def child(sqlite_path: Path) -> AsyncIterator[Child]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _CHILD,
        str(sqlite_path),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    c = Child(proc)
    try:
        assert await c.line() == "ready"
        yield c
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        await asyncio.wait_for(proc.wait(), 30)


@pytest.fixture
def store(sqlite_store: SQLiteStore) -> SQLiteStore:
    return sqlite_store


async def test_claim_wake_hears_another_process_submit(store: SQLiteStore, child: Child) -> None:
    sleeper = asyncio.ensure_future(store.claim_wake(["jobs"], POLL_MS))
    await asyncio.sleep(0.05)  # the sleeper has taken its first look
    sent = time.monotonic()
    child.tell("submit jobs")
    assert await asyncio.wait_for(sleeper, POLL_MS / 1000) is True
    assert time.monotonic() - sent < BOUND_S
    assert await child.line() == "done"
    assert (await store.stats(queue="jobs"))["jobs"]["queued"] == 1


async def test_task_done_wake_hears_another_process_cancel(
    store: SQLiteStore, child: Child
) -> None:
    task = await store.submit(name="job", queue="jobs")
    sleeper = asyncio.ensure_future(store.task_done_wake(task.id, POLL_MS))
    await asyncio.sleep(0.05)
    sent = time.monotonic()
    child.tell(f"cancel {task.id}")
    assert await asyncio.wait_for(sleeper, POLL_MS / 1000) is True
    assert time.monotonic() - sent < BOUND_S
    assert await child.line() == "done"
    done = await store.get(task.id)
    assert done is not None and done.status == "canceled"


async def test_own_writes_and_quiet_files_keep_the_timeout(store: SQLiteStore) -> None:
    # This store's own commits do not change the writer's data_version, and a
    # task on another queue signals nobody here: the sleep runs to its timeout.
    sleeper = asyncio.ensure_future(store.claim_wake(["jobs"], 300))
    await asyncio.sleep(0.05)
    await store.submit(name="job", queue="elsewhere")
    started = time.monotonic()
    assert await sleeper is False
    assert time.monotonic() - started > 0.1


async def test_close_ends_sleeps_and_leaves_no_ticker_behind(sqlite_path: Path) -> None:
    s = SQLiteStore(sqlite_path)
    await s.connect()
    before = asyncio.all_tasks()
    sleeper = asyncio.ensure_future(s.claim_wake(["jobs"], POLL_MS))
    await asyncio.sleep(0.05)
    watches = list(s._watches.values())
    assert [w.mode for w in watches] in (["notify"], ["poll"])  # watching while it sleeps
    await s.close()
    assert await asyncio.wait_for(sleeper, 1) is True
    await asyncio.sleep(0)
    assert not {t for t in asyncio.all_tasks() - before if not t.done()}
    assert [w.mode for w in watches] == [None]  # no notification or poll left armed


def test_close_from_another_loop_stops_the_ticker(sqlite_path: Path) -> None:
    # A hosted worker sleeps on its own loop (a thread); the console closes the
    # store from the main loop. The worker's loop must be left with nothing pending.
    import threading

    s = SQLiteStore(sqlite_path)
    asyncio.run(s.connect())
    loop = asyncio.new_event_loop()
    started = threading.Event()
    result: list[object] = []

    async def sleep() -> None:
        started.set()
        result.append(await s.claim_wake(["jobs"], POLL_MS))

    thread = threading.Thread(target=loop.run_until_complete, args=(sleep(),))
    began = time.monotonic()
    thread.start()
    assert started.wait(10)
    time.sleep(0.05)
    asyncio.run(s.close())
    thread.join(10)
    assert result == [True] and time.monotonic() - began < POLL_MS / 1000
    # One turn of the loop runs the stop the close scheduled; no tick is awaited.
    loop.run_until_complete(asyncio.sleep(0))
    pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
    loop.close()
    assert pending == []
