"""Armed wakes: a wake armed before a write elsewhere fires, on both dialects.

The writer is another process (a child Python running the engine on the same
database), so the wake can only come through the database: LISTEN/NOTIFY on
Postgres, the commit watch on SQLite (file-change notifications, or polling
where they are unavailable). A missed wake shows up as ``woken`` returning
False at its (long) timeout; nothing here measures time.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from test_sqlite_commit_wake import Child  # another process, writing when told

from engine import PostgresStore, SQLiteStore, TaskStore
from engine.store import _sqlite_commits
from engine.store._signals import Claimer, Signals

#: Long enough that only a missed wake reaches it.
WAKE_TIMEOUT_MS = 30_000

_CHILD = """
import asyncio, sys
from engine import PostgresStore, SQLiteStore

async def main() -> None:
    dialect, location, schema = sys.argv[1:4]
    if dialect == "sqlite":
        store = SQLiteStore(location)
    else:
        store = PostgresStore(location, schema=schema, max_size=1)
    await store.connect()
    print("ready", flush=True)
    for line in sys.stdin:
        command, _, arg = line.strip().partition(" ")
        if command == "cancel":
            await store.cancel(arg)
        elif command == "submit":
            await store.submit(name="job", queue=arg)
        print("done", flush=True)
    await store.close()

asyncio.run(main())
"""


def _location(store: TaskStore, request: pytest.FixtureRequest) -> list[str]:
    if isinstance(store, SQLiteStore):
        return ["sqlite", store.target, ""]
    return ["postgres", request.getfixturevalue("pg_dsn"), request.getfixturevalue("pg_schema")]


@pytest.fixture
async def child(store: TaskStore, request: pytest.FixtureRequest) -> AsyncIterator[Child]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _CHILD,
        *_location(store, request),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    c = Child(proc)
    try:
        assert await c.line() == "ready"
        yield c
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        await asyncio.wait_for(proc.wait(), 60)


async def _listening(store: TaskStore) -> None:
    """On Postgres, wait until the store's LISTEN is in place (a wake needs it)."""
    if not isinstance(store, PostgresStore):
        return
    for _ in range(800):
        listener = store._listener
        if listener is not None and listener.backend_pid is not None:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("listener never came up")


async def test_a_wake_armed_just_before_another_process_completes_fires(
    store: TaskStore, child: Child
) -> None:
    await _listening(store)
    task = await store.submit(name="job", queue="armed")
    wake = store.arm_task_done_wake(task.id)
    try:
        child.tell(f"cancel {task.id}")  # right after arming: no pause in between
        assert await wake.woken(WAKE_TIMEOUT_MS) is True
    finally:
        wake.close()
    assert await child.line() == "done"
    done = await store.get(task.id)
    assert done is not None and done.status == "canceled"


async def test_a_claim_wake_armed_just_before_another_process_submits_fires(
    store: TaskStore, child: Child
) -> None:
    await _listening(store)
    wake = store.arm_claim_wake(["armed-claims"])
    try:
        child.tell("submit armed-claims")
        assert await wake.woken(WAKE_TIMEOUT_MS) is True
    finally:
        wake.close()
    assert await child.line() == "done"


async def test_a_completion_in_this_process_hands_its_row_to_the_wake(store: TaskStore) -> None:
    # The waiter then needs no read: the row is the one the write committed.
    await store.submit(name="job", queue="rows")
    [claimed] = await store.claim(queues=["rows"], worker_id="w1")
    wake = store.arm_task_done_wake(claimed.id)
    try:
        await store.complete(task_id=claimed.id, worker_id="w1", result={"answer": 42})
        assert await wake.woken(WAKE_TIMEOUT_MS) is True
        assert wake.task is not None
        assert (wake.task.id, wake.task.status, wake.task.result) == (
            claimed.id,
            "succeeded",
            {"answer": 42},
        )
    finally:
        wake.close()


@pytest.mark.parametrize("new_store", ["sqlite"], indirect=True)
async def test_sqlite_polls_where_notifications_are_unavailable(
    store: TaskStore, child: Child, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_sqlite_commits, "NOTIFICATIONS", False)
    polling = SQLiteStore(store.target)  # type: ignore[attr-defined]
    await polling.connect()
    try:
        task = await polling.submit(name="job", queue="polled")
        wake = polling.arm_task_done_wake(task.id)
        try:
            assert [w.mode for w in polling._watches.values()] == ["poll"]
            child.tell(f"cancel {task.id}")
            assert await wake.woken(WAKE_TIMEOUT_MS) is True
        finally:
            wake.close()
        assert await child.line() == "done"
    finally:
        await polling.close()


@pytest.mark.parametrize("new_store", ["sqlite"], indirect=True)
async def test_sqlite_uses_file_notifications_on_linux(store: TaskStore) -> None:
    if not _sqlite_commits.notifications_available():
        pytest.skip("no file-change notifications on this platform")
    wake = store.arm_claim_wake(["q"])
    try:
        assert [w.mode for w in store._watches.values()] == ["notify"]  # type: ignore[attr-defined]
    finally:
        wake.close()


async def test_closing_the_store_gives_back_its_inotify_instance_before_returning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The console's quit checks that only the main thread is left: the thread
    # that closes the inotify instance (off the loop, ~10-20 ms) must be done by
    # then. A close made slower still (as on a loaded machine) shows it.
    if not _sqlite_commits.notifications_available():
        pytest.skip("no file-change notifications on this platform")
    import inotify_simple

    kernel_close = inotify_simple.INotify.close

    def slow_close(self: inotify_simple.INotify) -> None:
        time.sleep(0.1)
        kernel_close(self)

    monkeypatch.setattr(inotify_simple.INotify, "close", slow_close)
    store = SQLiteStore(str(tmp_path / "watched.db"))
    await store.connect()
    wake = store.arm_claim_wake(["q"])
    assert [w.mode for w in store._watches.values()] == ["notify"]
    wake.close()
    await store.close()
    left = [t.name for t in threading.enumerate() if t.name == "cairnq-inotify-close"]
    assert left == []


async def test_a_commit_published_after_its_event_was_read_still_wakes(tmp_path: Path) -> None:
    # A WAL commit raises its file event when it writes its frames and is
    # published (data_version moves) only after its fsync. Two commits' events
    # can come in one read: the first one's publication wakes the sleeper and
    # stops the watch; the second, published later, must still wake the next
    # sleeper although no event is left for it.
    if not _sqlite_commits.notifications_available():
        pytest.skip("no file-change notifications on this platform")
    db = tmp_path / "tasks.db"
    wal = tmp_path / "tasks.db-wal"
    db.write_bytes(b"")
    version = [1]
    watch = _sqlite_commits.CommitWatch(lambda: version[0], str(db), initial=1)
    signals = Signals()
    try:
        first = signals.arm_claim(["q"])
        watch.add(first)
        with wal.open("ab") as f:  # two commits' frames, back to back
            f.write(b"a")
            f.flush()
            f.write(b"b")
        version[0] = 2  # the first commit is published; the second is not yet
        assert await first.woken(WAKE_TIMEOUT_MS) is True
        first.close()
        second = signals.arm_claim(["q"])
        watch.add(second)
        await asyncio.sleep(0.01)  # the watch runs on, finding no change yet
        assert not second.fired
        version[0] = 3  # the second commit is published: no file event for it
        assert await second.woken(WAKE_TIMEOUT_MS) is True
        second.close()
    finally:
        watch.close()
        await asyncio.sleep(0)


async def test_a_signal_between_arming_and_waiting_is_kept() -> None:
    signals = Signals()
    done = signals.arm_done("task_1")
    claim = signals.arm_claim(["q"])
    signals.done("task_1")
    signals.queued("q")
    assert await done.woken(WAKE_TIMEOUT_MS) is True
    assert await claim.woken(WAKE_TIMEOUT_MS) is True
    done.close()
    claim.close()
    # Closed wakes are gone from the hub: a later signal finds no one.
    assert not signals._done_waiters and not signals._queue_waiters


async def test_a_claimer_wakes_for_every_signal_since_its_own_last_look() -> None:
    signals = Signals()
    first, second = Claimer(), Claimer()
    signals.claiming(["q"], first)
    signals.claiming(["q"], second)
    waiting = signals.arm_claim(["q"], first)
    # Wakes the claimer that waits; the other is between its look and its arm.
    signals.queued("q")
    assert await waiting.woken(WAKE_TIMEOUT_MS) is True
    waiting.close()
    later = signals.arm_claim(["q"], second)
    assert await later.woken(WAKE_TIMEOUT_MS) is True
    later.close()
    # Each has armed since, so neither fires for it again, and a claimer
    # whose look began after a signal has seen it.
    signals.queued("q")
    signals.claiming(["q"], first)
    again = [signals.arm_claim(["q"], c) for c in (first, second)]
    await asyncio.sleep(0)
    assert [w.fired for w in again] == [False, True]
    for w in again:
        w.close()
    # Callers that name no claimer share the hub's: the first to arm takes it.
    signals.claiming(["q"])
    signals.queued("q")
    shared = [signals.arm_claim(["q"]) for _ in range(2)]
    await asyncio.sleep(0)
    assert [w.fired for w in shared] == [True, False]
    for w in shared:
        w.close()
