"""SQLiteStore under concurrency: group commit, close barrier, other processes, locks."""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine import SQLiteStore, StoreClosed, StoreLocked

WRITER_SCRIPT = textwrap.dedent(
    """
    import asyncio, sys
    from engine import SQLiteStore

    async def main() -> None:
        store = SQLiteStore(sys.argv[1])
        ids = [(await store.submit(name="seq", payload={"i": i})).id for i in range(40)]
        batch = await asyncio.gather(*(store.submit(name="gather") for _ in range(60)))
        ids += [t.id for t in batch]
        keyed = await store.submit(name="keyed", key=sys.argv[2])
        ids.append(keyed.id)
        await store.close()
        print("\\n".join(ids))

    asyncio.run(main())
    """
)

LOCK_HOLDER_SCRIPT = textwrap.dedent(
    """
    import sqlite3, sys, time
    conn = sqlite3.connect(sys.argv[1], isolation_level=None)
    conn.execute("begin immediate")
    conn.execute("insert into cairnq_meta (key, value) values ('holder', 'x')")
    print("locked", flush=True)
    time.sleep(float(sys.argv[2]))
    conn.execute("rollback")
    """
)


@pytest.fixture
def store(sqlite_store: SQLiteStore) -> SQLiteStore:
    return sqlite_store


def count(path: Path, sql: str = "select count(*) from cairnq_tasks") -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute(sql).fetchone()[0])


@pytest.fixture
def trace(store: SQLiteStore) -> Iterator[list[str]]:
    """Statements the writer connection runs.

    Group commit has no public window, so this hooks the writer's stdlib
    connection: the trace callback is the only way to see where BEGIN and
    COMMIT fall around a batch.
    """
    seen: list[str] = []
    raw = store._writer.raw
    assert raw is not None
    raw.set_trace_callback(seen.append)
    yield seen
    raw.set_trace_callback(None)


async def test_concurrent_submits_share_one_commit(
    store: SQLiteStore, sqlite_path: Path, trace: list[str]
) -> None:
    visible_at_answer: list[bool] = []

    async def submit(i: int) -> None:
        task = await store.submit(name="x", payload={"i": i})
        # Answered only after COMMIT: another connection already sees the row.
        with sqlite3.connect(sqlite_path) as other:
            found = other.execute("select 1 from cairnq_tasks where id = ?", (task.id,))
            visible_at_answer.append(found.fetchone() is not None)

    await asyncio.gather(*(submit(i) for i in range(64)))
    assert visible_at_answer == [True] * 64
    begins = [s for s in trace if s.lower() == "begin immediate"]
    commits = [s for s in trace if s.lower() == "commit"]
    assert count(sqlite_path) == 64
    # Batched: far fewer transactions than writes (the first may run bare).
    assert 1 <= len(begins) == len(commits) <= 4


async def test_failing_statement_fails_only_its_caller(
    store: SQLiteStore, sqlite_path: Path, trace: list[str]
) -> None:
    # No public operation fails at the SQL level on its own (the store validates
    # everything first), so a statement violating a primary key goes through the
    # same internal group-commit entry point every single-statement write uses.
    bad = store._write("insert into cairnq_meta (key, value) values ('protocol_version', '9')", {})
    results = await asyncio.gather(
        *(store.submit(name="x") for _ in range(5)),
        bad,
        *(store.submit(name="y") for _ in range(5)),
        return_exceptions=True,
    )
    failures = [r for r in results if isinstance(r, BaseException)]
    assert len(failures) == 1 and isinstance(failures[0], sqlite3.IntegrityError)
    assert count(sqlite_path) == 10
    assert count(sqlite_path, "select value from cairnq_meta where key = 'protocol_version'") == 1
    assert sum(1 for s in trace if s.lower() == "begin immediate") >= 1
    # The connection is not left inside a transaction.
    raw = store._writer.raw
    assert raw is not None and not raw.in_transaction


async def test_close_is_a_barrier(sqlite_path: Path) -> None:
    store = SQLiteStore(sqlite_path)
    await store.connect()
    pending = [asyncio.ensure_future(store.submit(name="x", payload={"i": i})) for i in range(50)]
    await asyncio.sleep(0)  # every submit has reached the store and queued its write
    await store.close()
    ids = {t.id for t in await asyncio.gather(*pending)}
    assert len(ids) == 50 and count(sqlite_path) == 50
    with pytest.raises(StoreClosed):
        await store.submit(name="late")
    assert count(sqlite_path) == 50


async def test_cancelled_caller_does_not_break_the_batch(store: SQLiteStore) -> None:
    tasks = [asyncio.ensure_future(store.submit(name="x")) for _ in range(20)]
    await asyncio.sleep(0)
    tasks[3].cancel()
    done = await asyncio.gather(*tasks, return_exceptions=True)
    assert sum(isinstance(d, asyncio.CancelledError) for d in done) == 1
    assert len(await store.list(limit=100)) in (19, 20)  # the cancelled write may have landed


async def _run(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_two_processes_cold_start_and_write_without_loss(tmp_path: Path) -> None:
    path = tmp_path / "new" / "tasks.db"
    results = await asyncio.gather(
        _run("-c", WRITER_SCRIPT, str(path), "key-a"),
        _run("-c", WRITER_SCRIPT, str(path), "key-b"),
    )
    ids: list[str] = []
    for code, out, err in results:
        assert code == 0, err
        ids += out.split()
    assert len(ids) == 2 * 101 and len(set(ids)) == len(ids)
    with sqlite3.connect(path) as conn:
        stored = {r[0] for r in conn.execute("select id from cairnq_tasks")}
        ledger = [r[0] for r in conn.execute("select name from cairnq_migrations")]
        meta = dict(conn.execute("select key, value from cairnq_meta").fetchall())
    assert stored == set(ids)
    assert len(ledger) == len(set(ledger)) == 9
    assert meta == {"protocol_version": "1", "schema_version": "10"}


class _LockHolder:
    """Another process holding the database's write lock for ``seconds``."""

    def __init__(self, path: Path, seconds: float) -> None:
        self.path, self.seconds = path, seconds
        self.proc: asyncio.subprocess.Process | None = None

    async def __aenter__(self) -> _LockHolder:
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            LOCK_HOLDER_SCRIPT,
            str(self.path),
            str(self.seconds),
            stdout=asyncio.subprocess.PIPE,
        )
        assert self.proc.stdout is not None
        assert (await self.proc.stdout.readline()).strip() == b"locked"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.proc is not None
        await self.proc.wait()


class _Ticker:
    """Counts event-loop ticks: a blocked loop would stop it."""

    def __init__(self) -> None:
        self.ticks = 0
        self.task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(0.01)
            self.ticks += 1

    def stop(self) -> None:
        self.task.cancel()


async def _timed(call: Any) -> tuple[float, Any]:
    start = time.monotonic()
    try:
        result = await call
    except Exception as exc:
        result = exc
    return time.monotonic() - start, result


async def test_lock_held_elsewhere_is_waited_out_without_blocking_the_loop(
    store: SQLiteStore, sqlite_path: Path
) -> None:
    queued = await store.submit(name="before")
    async with _LockHolder(sqlite_path, 0.8):
        ticker = _Ticker()
        # Reads do not wait for a writer in WAL mode.
        assert (await store.get(queued.id)) == queued
        waits = await asyncio.gather(
            _timed(store.submit(name="plain")),
            _timed(store.submit(name="keyed", key="k")),
            _timed(store.cancel(queued.id)),
        )
        ticker.stop()
    for elapsed, result in waits:
        assert not isinstance(result, Exception), result
        assert elapsed >= 0.4
    assert ticker.ticks >= 30
    assert count(sqlite_path) == 3


async def test_lock_held_past_the_budget_fails_after_busy_timeout(sqlite_path: Path) -> None:
    store = SQLiteStore(sqlite_path, busy_timeout_ms=300)
    queued = await store.submit(name="before")
    try:
        # The holder keeps the lock far longer than any wait here: every error must
        # come while it still holds it (no wall-clock bound, which load would break).
        async with _LockHolder(sqlite_path, 60.0) as holder:
            ticker = _Ticker()
            waits = await asyncio.gather(
                _timed(store.submit(name="plain")),
                _timed(store.submit(name="keyed", key="k")),
                _timed(store.cancel(queued.id)),
                _timed(store.claim(queues=["default"], worker_id="w")),
            )
            ticker.stop()
            assert holder.proc is not None and holder.proc.returncode is None
            for elapsed, result in waits:
                assert isinstance(result, StoreLocked), result
                assert isinstance(result.__cause__, sqlite3.OperationalError)
                assert str(result).startswith("database is locked: another connection held")
                assert elapsed >= 0.3  # it waited out busy_timeout_ms first
            assert ticker.ticks >= 15
            holder.proc.terminate()  # its lock goes with it
        # Nothing was written, and the store works again once the lock is gone.
        assert count(sqlite_path) == 1
        assert (await store.get(queued.id)).status == "queued"  # type: ignore[union-attr]
        assert (await store.cancel(queued.id)) is not None
    finally:
        await store.close()


async def _submit_many(store: SQLiteStore, label: str) -> list[str]:
    ids = []
    for round_ in range(10):
        batch = await asyncio.gather(
            *(store.submit(name=label, payload={"r": round_, "i": i}) for i in range(20))
        )
        ids += [t.id for t in batch]
        ids.append((await store.submit(name=label, key=f"{label}-{round_}")).id)
    return ids


async def test_two_handles_on_two_loops_write_without_loss(sqlite_path: Path) -> None:
    """Two handles in one process, one on another thread's loop (like a worker thread).

    Their writer connections contend for the file's lock, so this exercises the
    busy path (back-off, the writer-thread drain) inside one process.
    """
    main = SQLiteStore(sqlite_path)
    await main.connect()
    other = SQLiteStore(sqlite_path)

    async def on_other_loop() -> list[str]:
        try:
            return await _submit_many(other, "other")
        finally:
            await other.close()

    try:
        other_ids, main_ids = await asyncio.gather(
            asyncio.to_thread(asyncio.run, on_other_loop()),
            _submit_many(main, "main"),
        )
    finally:
        await main.close()
    assert len(set(other_ids) | set(main_ids)) == 2 * 210
    assert count(sqlite_path) == 2 * 210


async def test_a_transaction_is_not_starved_by_a_stream_of_group_writes(
    sqlite_path: Path,
) -> None:
    """A keyed submit (its own transaction) gets the connection while group writes stream.

    Another thread's loop submits flat out on the same store, so the group's
    queue is never empty and its drain never stops by itself. The drain used to
    let go of the connection between batches only for an instant, which a keyed
    submit asking from its loop every few milliseconds kept missing until its
    busy budget ran out. That needs CPU contention to show (the GIL must keep the
    asking loop off the CPU while the drain runs): on an idle machine this passes
    even without the fix, while tests/reliability/test_reliability_sqlite_fleet.py
    beside two busy-looping processes failed 3 runs in 4 before it and 0 in 3 after.
    """
    store = SQLiteStore(sqlite_path, busy_timeout_ms=500)
    await store.connect()
    stop = threading.Event()
    streamed: list[int] = []

    async def stream() -> None:
        async def lane() -> None:
            while not stop.is_set():
                await store.submit(name="stream")
                streamed.append(1)

        await asyncio.gather(*(lane() for _ in range(64)))

    streaming = asyncio.create_task(asyncio.to_thread(asyncio.run, stream()))
    try:
        while len(streamed) < 200:  # the stream is flowing
            await asyncio.sleep(0.01)
        keyed = [await store.submit(name="keyed", key=f"k{i}") for i in range(30)]
    finally:
        stop.set()
        await streaming
        await store.close()
    assert len({t.id for t in keyed}) == 30
    assert len(streamed) > 200  # the stream went on meanwhile
