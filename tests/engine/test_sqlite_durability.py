"""SQLite durability: FULL by default on every connection, NORMAL only on request,
and a WAL that stays bounded under sustained writes with checkpoints off the loop."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from engine import CairnQ, SQLiteStore, Worker

#: ``PRAGMA synchronous`` answers with a number.
LEVELS = {"full": 2, "normal": 1}


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[sqlite3.Connection]]:
    """Every stdlib connection opened while the test runs.

    The store keeps its connections private (writer, reader, checkpointer,
    inspect reader, each opened on some thread); recording ``sqlite3.connect``
    is the only way to reach all of them, including any added later.
    """
    seen: list[sqlite3.Connection] = []
    real = sqlite3.connect

    def record(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = real(*args, **kwargs)
        seen.append(conn)
        return conn

    monkeypatch.setattr(sqlite3, "connect", record)
    yield seen


def _synchronous(conn: sqlite3.Connection) -> int | None:
    try:
        return int(conn.execute("pragma synchronous").fetchone()[0])
    except sqlite3.ProgrammingError:  # closed: a failed probe, nothing to check
        return None


def _store_of(kind: str, path: Path, **kwargs: Any) -> tuple[SQLiteStore, Any]:
    if kind == "store":
        store = SQLiteStore(path, **kwargs)
        return store, store
    if kind == "client":
        client = CairnQ.sqlite(str(path), **kwargs)
        return client.store, client  # type: ignore[return-value]
    worker = Worker.sqlite(str(path), **kwargs)
    return worker._store, worker  # type: ignore[return-value]  # no public window


@pytest.mark.parametrize("kind", ["store", "client", "worker"])
@pytest.mark.parametrize("mode", [None, "full", "normal"])
async def test_every_connection_runs_the_chosen_durability(
    opened: list[sqlite3.Connection], sqlite_path: Path, kind: str, mode: str | None
) -> None:
    kwargs = {} if mode is None else {"synchronous": mode}
    store, _ = _store_of(kind, sqlite_path, **kwargs)
    await store.connect()
    try:
        # Touch every path that opens or commits on a connection of its own:
        # group commit, a keyed transaction, a claim, a read, an inspect read,
        # and enough writes for a checkpoint.
        await asyncio.gather(*(store.submit(name="n", payload={"i": i}) for i in range(40)))
        for i in range(40):
            await store.submit(name="k", key=f"k{i}")
        claimed = await store.claim(queues=["default"], worker_id="w", limit=2)
        await asyncio.gather(
            *(store.complete(task_id=t.id, worker_id="w", result=None) for t in claimed)
        )
        await store.get("absent")
        await store.read_statement("get", {"id": "absent"})
        expected = LEVELS[mode or "full"]
        levels = [_synchronous(conn) for conn in opened]
        checked = [level for level in levels if level is not None]
        # writer, reader, checkpointer, inspect reader
        assert len(checked) >= 4, levels
        assert checked == [expected] * len(checked), levels
        assert store.synchronous == (mode or "full")
    finally:
        await store.close()


@pytest.mark.parametrize("bad", ["off", "extra", "", 2, None, True])
def test_a_bad_synchronous_is_refused_before_anything_opens(
    opened: list[sqlite3.Connection], sqlite_path: Path, bad: Any
) -> None:
    makers: list[Callable[[], Any]] = [
        lambda: SQLiteStore(sqlite_path, synchronous=bad),
        lambda: CairnQ.sqlite(str(sqlite_path), synchronous=bad),
        lambda: Worker.sqlite(str(sqlite_path), synchronous=bad),
    ]
    for make in makers:
        with pytest.raises(ValueError, match="synchronous"):
            make()
    assert opened == []
    assert not sqlite_path.exists()


async def test_mixed_case_is_accepted(sqlite_path: Path) -> None:
    store = SQLiteStore(sqlite_path, synchronous="NORMAL")  # type: ignore[arg-type]
    assert store.synchronous == "normal"


SUBMITS = 10_000
WAL_BOUND = 64 * 1024 * 1024


@pytest.mark.parametrize("mode", ["full", "normal"])
async def test_wal_stays_bounded_and_checkpoints_run_off_the_loop(
    opened: list[sqlite3.Connection], sqlite_path: Path, mode: str
) -> None:
    """10,000 serial submits (the issue's case): the WAL stays under 64 MB.

    Before, a passive checkpoint racing a stream of commits never caught up,
    the WAL never restarted, and it reached ~130-170 MB. FULL runs fewer
    submits in the same count's worth of frames: its commits are slower, not
    smaller, so the NORMAL run is the one that stresses the checkpointer.
    """
    count = SUBMITS if mode == "normal" else SUBMITS // 5
    store = SQLiteStore(sqlite_path, synchronous=mode)  # type: ignore[arg-type]
    await store.connect()
    loop_thread = threading.get_ident()
    checkpoints: list[int] = []

    def on_statement(sql: str) -> None:
        if "wal_checkpoint" in sql:
            checkpoints.append(threading.get_ident())

    for conn in opened:
        conn.set_trace_callback(on_statement)
    wal = Path(f"{sqlite_path}-wal")
    largest = 0
    try:
        for i in range(count):
            await store.submit(name="n", payload={"i": i, "pad": "x" * 200})
            if i % 250 == 0:
                largest = max(largest, wal.stat().st_size)
        largest = max(largest, wal.stat().st_size)
    finally:
        await store.close()
    assert largest < WAL_BOUND, largest
    assert checkpoints, "no checkpoint ran"
    assert loop_thread not in checkpoints


async def test_checkpoints_run_beside_the_writer_threads_commits(
    opened: list[sqlite3.Connection], sqlite_path: Path
) -> None:
    """Under FULL, commits run on the writer thread; a checkpoint queued in line
    with them made the next commit wait out its copying and fsyncs (~25 % of a
    sequential submit's time). Checkpoints now run on a thread of their own."""
    store = SQLiteStore(sqlite_path)  # FULL: commits run on the writer thread
    await store.connect()
    loop_thread = threading.get_ident()
    commits: set[int] = set()
    checkpoints: set[int] = set()

    def on_statement(sql: str) -> None:
        if "wal_checkpoint" in sql:
            checkpoints.add(threading.get_ident())
        elif sql.lower().startswith("insert into cairnq_tasks"):
            commits.add(threading.get_ident())

    for conn in opened:
        conn.set_trace_callback(on_statement)
    try:
        for i in range(100):  # serial: each is its own commit
            await store.submit(name="n", payload={"i": i})
    finally:
        await store.close()
    assert commits and checkpoints, (commits, checkpoints)
    assert loop_thread not in commits | checkpoints
    assert not commits & checkpoints, (commits, checkpoints)


async def test_a_restart_checkpoint_runs_between_the_writer_threads_commits(
    opened: list[sqlite3.Connection], sqlite_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The RESTART that rewinds a long WAL waits for writers and holds them off.
    Run from the housekeeping thread it made this store's own writes meet
    SQLITE_BUSY and sleep through backoffs; on the writer thread, between
    commits, they queue behind it instead."""
    from engine.store import _sqlite_group, _sqlite_writer

    monkeypatch.setattr(_sqlite_writer, "WAL_RESTART_FRAMES", 64)
    refused: list[int] = []
    real_batch = _sqlite_group.sync.run_batch

    def counting(conn: sqlite3.Connection, items: Any) -> Any:
        try:
            return real_batch(conn, items)
        except _sqlite_group.sync.Busy:
            refused.append(1)
            raise

    monkeypatch.setattr(_sqlite_group.sync, "run_batch", counting)
    store = SQLiteStore(sqlite_path)  # FULL: commits run on the writer thread
    await store.connect()
    commits: set[int] = set()
    restarts: set[int] = set()

    def on_statement(sql: str) -> None:
        if "wal_checkpoint(restart)" in sql:
            restarts.add(threading.get_ident())
        elif sql.lower().startswith("insert into cairnq_tasks"):
            commits.add(threading.get_ident())

    for conn in opened:
        conn.set_trace_callback(on_statement)
    try:
        for i in range(200):
            await store.submit(name="n", payload={"i": i, "pad": "x" * 200})
    finally:
        await store.close()
    assert restarts, "no RESTART ran"
    assert restarts == commits, (restarts, commits)
    assert refused == []


LEAKED_STORE_SCRIPT = textwrap.dedent(
    """
    import asyncio, gc, sys, threading, time
    from engine import SQLiteStore

    async def main() -> None:
        store = SQLiteStore(sys.argv[1])  # FULL: commits run on the store's thread
        await store.connect()
        await asyncio.gather(*(store.submit(name="n") for _ in range(20)))
        await store.submit(name="k", key="k")
        await store.claim(queues=["default"], worker_id="w", limit=5)
        # never closed: dropped with the coroutine's frame

    asyncio.run(main())
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        gc.collect()
        if threading.active_count() == 1:
            sys.exit(0)
        time.sleep(0.05)
    sys.exit(1)
    """
)


def test_a_store_nobody_closed_does_not_keep_its_thread_alive(sqlite_path: Path) -> None:
    """A store dropped without ``close()`` is collected and its writer thread
    ends: the thread keeps no reference to the jobs it ran (with aiosqlite's
    thread, which held its last job, such a store was never collected and the
    interpreter never exited)."""
    result = subprocess.run(
        [sys.executable, "-c", LEAKED_STORE_SCRIPT, str(sqlite_path)],
        timeout=120,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr


async def test_a_checkpoint_waits_for_no_transaction_of_the_store_itself(
    opened: list[sqlite3.Connection], sqlite_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checkpoint due while a claim session holds the writer connection waits its turn.

    The session's COMMIT (under FULL) queues on the writer thread; a checkpoint
    job ahead of it that needed the write lock (RESTART, once the WAL is long)
    waited its whole busy timeout for that very transaction: a 250 ms stall
    every 32 worker cycles. Now a checkpoint runs only while no transaction of
    the store's writer is open, and one that could not run is retried after
    the next write. (The passive checkpoints, on the housekeeping thread,
    never wait for a writer; every checkpoint here escalates to a RESTART.)
    """
    from engine.store import _sqlite_writer

    monkeypatch.setattr(_sqlite_writer, "WAL_RESTART_FRAMES", 0)
    store = SQLiteStore(sqlite_path)
    await store.connect()
    writer = store._writer
    raw, thread = writer.raw, writer._thread
    assert raw is not None and thread is not None
    during: list[bool] = []

    def on_statement(sql: str) -> None:
        if "wal_checkpoint(restart)" in sql:
            during.append(raw.in_transaction)

    for c in opened:
        c.set_trace_callback(on_statement)
    try:
        for i in range(3):
            await store.submit(name="job", payload={"i": i})
        inside = asyncio.Event()
        go_on = asyncio.Event()

        async def plan(draw: Any) -> list[Any]:
            rows = await draw(None, 1)
            inside.set()
            await go_on.wait()
            return list(rows)

        session = asyncio.ensure_future(
            store.claim_session(queues=["default"], worker_id="w", names=None, plan=plan)
        )
        await inside.wait()
        assert raw.in_transaction
        writer._writes = 10**6  # a checkpoint is due: the next count posts one
        writer._wrote()
        await thread.call(lambda: None)  # the writer thread got past it
        go_on.set()
        assert len(await session) == 1
        await store.submit(name="job")  # a write after: the deferred checkpoint runs
        # The drain that counted it, the passive checkpoint it queued on the
        # housekeeping thread, then the RESTART that one handed back.
        await thread.call(lambda: None)
        housekeeper = writer._housekeeper
        assert housekeeper is not None
        await asyncio.get_running_loop().run_in_executor(housekeeper, lambda: None)
        await thread.call(lambda: None)
    finally:
        await store.close()
    assert during and not any(during), during
