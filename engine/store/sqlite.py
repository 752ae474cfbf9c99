"""The SQLite store: cairnq protocol v1 over one database file, via aiosqlite.

Where the work runs:

* **Every call gives the loop a turn** (``_yield_loop``): an inline operation
  ends with ``asyncio.sleep(0)``, so a task looping on store calls never
  starves timers, heartbeats or other tasks' commits.
* **A COMMIT that fsyncs runs on aiosqlite's thread.** Under
  ``synchronous=FULL`` (the default) group-commit batches, keyed
  transactions, claims and a claim session's COMMIT run there, the thread
  letting go of the connection when done; the loop only waits for the answer.
* **Inline, on the caller's event loop** (the rest; all of it under NORMAL).
  After the open sequence the writer connection's ``busy_timeout`` is 0, so
  SQLite never waits on a lock: a statement does its own work (a WAL commit
  without fsync is ~0.03 ms, cheaper than one hop to a thread; docs/engine.md)
  or returns SQLITE_BUSY at once. So reads, a claim session's draws and, under
  NORMAL, whole write transactions and group-commit batches run inline; a busy
  database is waited out with ``asyncio.sleep`` (1 ms doubling to 10 ms,
  jittered) until the caller's ``busy_timeout_ms`` budget is spent, then
  ``StoreLocked`` ("database is locked"). A threading lock
  (``_owner``) gives the writer connection to one user at a time.
* **Reads** use a second, ``query_only`` connection inline (WAL readers never
  wait for writers); a read that would wait, and every read of an in-memory
  database (a second connection would be another database), use the writer.
* **Group commit** (``_sqlite_group``): single-statement writes queue up and
  one flush takes all of them — bare if one, else one ``BEGIN IMMEDIATE`` —
  answering callers after COMMIT; consecutive inserts become one statement.
* **Wakeups from other processes** (``_sqlite_commits``): while a worker or
  waiter sleeps, ``PRAGMA data_version`` on the writer is read when the WAL
  changes (inotify on Linux; a ~15 ms poll elsewhere); another connection's
  commit ends the sleep early.
* **aiosqlite's thread** opens the database (migrations wait on
  ``busy_timeout``, so never on the loop), drains group-commit batches while
  another process holds the lock.
* **A housekeeping thread** with a connection of its own runs passive WAL
  checkpoints (the writer's automatic checkpoint would fsync inside an inline
  commit) and planner statistics, beside the writer thread's commits rather
  than queued in line with them; the RESTART that rewinds a long WAL is
  handed to the writer thread, between commits.

Durability: WAL with ``synchronous=FULL`` by default, as the cairnq SDKs run —
the WAL is fsynced before any caller is answered, so every acknowledged write
survives a crash of the process, of the OS, or a power loss. Group commit makes
concurrent writers share that fsync. ``synchronous="normal"`` is an opt-in that
skips it: a process crash still loses nothing, an OS crash or power loss may
drop the last acknowledged commits. The WAL stays bounded: a checkpoint
restarts a WAL that passed ``WAL_RESTART_FRAMES``.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import functools
import os
import sqlite3
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal, TypeVar, cast

import aiosqlite

from engine import _json, _rules
from engine._clock import now_ms
from engine._errors import AlreadyExists, LostLease, StoreClosed, StoreLocked, StoreUnavailable
from engine._models import TASK_COLUMNS, SubmitOutcome, Task, TaskRef, in_claim_order
from engine._sql import migrations, specialise, statement
from engine._sqlite_file import (
    holds_nothing,
    is_read_only_file,
    read_only_uri,
    remove_database_files,
)
from engine.store import _sqlite_sync as sync
from engine.store._base import (
    LEASE_EXPIRED_JSON,
    ClaimArgs,
    CompletingClaim,
    NewTask,
    Plan,
    StoreCapabilities,
    TaskStore,
    insert_params,
    keyed_choice,
    task_from_values,
    undecodable,
)
from engine.store._faults import locked, sqlite_fault
from engine.store._signals import Wake
from engine.store._sqlite_commits import CommitWatch
from engine.store._sqlite_group import GroupCommit, backoff

T = TypeVar("T")
R = TypeVar("R")
#: ``SQLiteStore(synchronous=...)``: how durable an acknowledged commit is.
Synchronous = Literal["full", "normal"]

_STATISTICS_EVERY_S = 60.0
#: Write transactions between two WAL checkpoints (see SQLiteStore._wrote).
_CHECKPOINT_EVERY = 32
#: WAL frames (pages; 4 KiB by default) past which a checkpoint restarts the
#: WAL instead of only copying it (``_sqlite_sync.checkpoint``): ~8 MiB.
WAL_RESTART_FRAMES = 2048


def _sql(name: str) -> str:
    return statement("sqlite", name)


_TASK_WIDTH = len(TASK_COLUMNS)


async def _yield_loop() -> None:
    """Give the event loop one turn after an operation that ran inline.

    An inline read or transaction finishes without awaiting anything, so a task
    looping on store calls would otherwise never let timers, heartbeats or
    other tasks' commits (a group-commit flush, a claim session between draws)
    run. One ``sleep(0)`` costs ~15 µs; a hop to aiosqlite's thread ~100 µs
    more (measured; bench/README.md).
    """
    await asyncio.sleep(0)


def _forget() -> None:
    """A no-op job for the writer thread (``SQLiteStore._poster`` says why)."""


def _is_memory(path: str) -> bool:
    if path in ("", ":memory:"):
        return True
    return path.startswith("file:") and (path.startswith("file::memory:") or "mode=memory" in path)


def _task(row: Sequence[Any]) -> Task:
    """A ``Task`` from a ``select *`` row (columns in the §1.5 order).

    Columns an operator added after the protocol's (allowed: the open-time schema
    check makes sure the protocol's come first, in order) are left out.
    """
    return task_from_values(row[:_TASK_WIDTH])


def _first_task(rows: sync.Rows) -> Task | None:
    return _task(rows[0]) if rows else None


@functools.cache
def purge_statement(active: frozenset[str]) -> str:
    """``purge`` specialised for the filters given a value, read in completion order.

    Each ``purge(limit=n)`` must read about ``n`` candidates, oldest first, not
    every candidate of the backlog sorted to keep ``n``. With a queue, the
    partial ``(queue, completed_at_ms)`` index gives that; it is only usable
    while the literal status list is spelled as in its definition, so that
    shape is left alone. Otherwise the planner chose (with or without
    statistics) the three statuses of ``(status, completed_at_ms)`` or every
    row of a name, then sorted them all. A unary ``+`` on the status list and
    the name term (same meaning; the list is still spelled literally) leaves
    ``(completed_at_ms)``, or ``(status, completed_at_ms)`` for one status, as
    the index to walk (tests/engine/test_query_plans.py).
    """
    sql = specialise(_sql("purge"), active)
    if "queue" in active:
        return sql
    by_age = sql.replace("where status in (", "where +status in (", 1)
    by_age = by_age.replace("and t.name = :name", "and +t.name = :name", 1)
    if "+status in (" not in by_age or ("name" in active and "+t.name" not in by_age):
        raise RuntimeError("sql/sqlite/purge.sql changed shape; update purge_statement")
    return by_age


def _claim_statement(variant: str, params: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A claim variant's text, its lists bound as JSON arrays (``json_each``, §2.3)."""
    for name in ("queues", "names"):
        if params.get(name) is not None:
            params[name] = _json.dumps(params[name])
    return _sql(variant), params


class SQLiteStore(TaskStore):
    """A cairnq database in one SQLite file (or in memory), shared with cairnq SDKs.

    Args:
        path: the database file (its parent directory is created), ``":memory:"``,
            or a ``file:`` URI.
        busy_timeout_ms: how long a write may wait for another connection's lock
            before failing with ``StoreLocked`` ("database is locked"). Other
            storage faults raise ``StorageFull`` (disk full) or ``StorageError``
            (I/O error, damaged file), SQLite's error as ``__cause__``.
        read_only: open the file read-only; no migration runs and every write
            raises ``StoreUnavailable``.
        migrate: apply missing migrations on connect; when False, a database
            without the cairnq tables raises ``StoreUnavailable``.
        synchronous: ``"full"`` (the default, as the cairnq SDKs run): every
            acknowledged commit is fsynced and survives an OS crash or power
            loss. ``"normal"`` is an opt-in trade: commits skip the fsync (several
            times faster one at a time), a crash of the process still loses
            nothing, but an OS crash or power loss can drop the last
            acknowledged commits.

    Raises:
        ValueError: a bad ``busy_timeout_ms`` or ``synchronous`` (nothing is opened).
    """

    dialect = "sqlite"
    capabilities = StoreCapabilities(completing_claim=True)

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout_ms: int = 5_000,
        read_only: bool = False,
        migrate: bool = True,
        synchronous: Synchronous = "full",
    ) -> None:
        self._path = os.fspath(path)
        _rules.integer(busy_timeout_ms, "busy_timeout_ms", minimum=0)
        self._synchronous = sync.check_synchronous(synchronous)
        self._memory = _is_memory(self._path)
        # A COMMIT that fsyncs (FULL, on a file) runs on the writer thread, not
        # inline: a millisecond or more of disk wait must not hold the loop.
        self._offload = self._synchronous == "full" and not self._memory
        self._uri = self._path.startswith("file:")
        if self._memory:
            # Each in-memory handle is its own database: a unique identity keeps
            # the signal hubs of two handles apart.
            identity = f"sqlite-memory:{uuid.uuid4().hex}"
        elif self._uri:
            identity = self._path
        else:
            identity = os.path.realpath(self._path)
        super().__init__(identity)
        self._busy_timeout_ms = busy_timeout_ms
        self._read_only = bool(read_only)
        self._migrate = bool(migrate)
        self._conn: aiosqlite.Connection | None = None
        self._raw: sqlite3.Connection | None = None
        self._reader: sqlite3.Connection | None = None
        # The reader is used from whichever thread calls; one user at a time.
        self._reader_lock = threading.Lock()
        # Introspection reads (read_statement) scan pages of thousands of rows: they
        # run on a thread of their own with a connection of their own, so a console
        # sharing this loop never freezes for them, and writers never wait on them.
        self._inspect_thread: ThreadPoolExecutor | None = None
        self._inspect_reader: sqlite3.Connection | None = None
        self._reader_at: tuple[str, bool] | None = None
        self._connect_lock: asyncio.Lock | None = None
        # Held for a whole claim session, whose transaction stays open while its
        # plan awaits between draws: no other operation of this loop may join it.
        self._session_lock = asyncio.Lock()
        # Held by whoever uses the writer connection right now: an operation or
        # group-commit flush inline on some loop, or the writer thread's drain.
        self._owner = threading.Lock()
        self._post: Callable[[Callable[[], None]], None] | None = None
        self._checkpointer: sqlite3.Connection | None = None
        # Checkpoints and statistics run on a thread of their own (``_housekeep``),
        # never in line with the writer thread's commits.
        self._housekeeper: ThreadPoolExecutor | None = None
        self._writes = 0
        self._checkpoint_queued = False
        self._group: GroupCommit | None = None
        self._inflight = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._closed = False
        self._next_statistics = 0.0
        self._watches: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, CommitWatch] = (
            weakref.WeakKeyDictionary()
        )
        # The writer's data_version as last read (at connect, then by commit
        # watches): a watch whose first look finds the writer busy starts there.
        self._last_version: int | None = None
        # SQLite's last "database is locked": the cause of a StoreLocked for a
        # caller that only ever found the connection in use here meanwhile.
        self._last_busy: BaseException | None = None

    # -- lifecycle -------------------------------------------------------------------

    @property
    def target(self) -> str:
        """The database path as given."""
        return self._path

    @property
    def synchronous(self) -> Synchronous:
        """``"full"`` or ``"normal"``: the durability every connection runs with."""
        return cast(Synchronous, self._synchronous)

    @property
    def read_only(self) -> bool:
        """True when the store was opened with ``read_only=True``."""
        return self._read_only

    async def connect(self) -> None:
        """Open the database: WAL, foreign keys, migrations, statistics, version check.

        Raises:
            StoreUnavailable: the path is a directory, not writable, not a SQLite
                database, or lacks the cairnq tables when migrations are off.
            ProtocolVersionMismatch: the database's ``protocol_version`` is not 1
                (nothing is written).
            StoreClosed: the store was closed.
        """
        if self._closed:
            raise StoreClosed(f"store {self._path} is closed")
        if self._conn is not None:
            return
        if self._connect_lock is None:
            self._connect_lock = asyncio.Lock()
        async with self._connect_lock:
            if self._conn is None:
                new = self._creates_file()
                try:
                    await self._open()
                except BaseException as exc:
                    if new and not isinstance(exc, StoreLocked):
                        self._remove_unmade_file()
                    raise

    def _creates_file(self) -> bool:
        """True when opening would create the database file (it does not exist yet)."""
        return not (self._memory or self._uri or os.path.lexists(self._path))

    def _remove_unmade_file(self) -> None:
        """After a failed open that created the file: remove it if it holds nothing.

        A refused open leaves nothing behind (a full disk left a 0-byte file, or
        one page and an empty WAL). A file another process made a database of
        meanwhile (a table, WAL content, or this open refused as locked, above)
        is never touched.
        """
        if holds_nothing(self._path):
            remove_database_files(self._path)

    def _location(self) -> tuple[str, bool]:
        """Check the path before opening; ``(what to open, as a URI?)``."""
        if self._memory or self._uri:
            return self._path, self._uri
        path = Path(self._path)
        if path.is_dir():
            raise StoreUnavailable(f"cannot open SQLite database {self._path}: it is a directory")
        if self._read_only:
            if not path.exists():
                raise StoreUnavailable(
                    f"cannot open SQLite database {self._path} read-only: no such file"
                )
            # mode=ro: the file cannot be written through this store at all.
            return read_only_uri(path), True
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreUnavailable(
                f"cannot open SQLite database {self._path}: cannot create its directory "
                f"{path.parent} ({exc.strerror or exc})"
            ) from exc
        if is_read_only_file(path):
            raise StoreUnavailable(
                f"cannot open SQLite database {self._path}: the file is not writable "
                "(open it with read_only=True to read it)"
            )
        if not os.access(path.parent, os.W_OK | os.X_OK):
            raise StoreUnavailable(
                f"cannot open SQLite database {self._path}: location is not writable"
            )
        return self._path, False

    async def _open(self) -> None:
        location, uri = self._location()
        conn = aiosqlite.connect(location, uri=uri, isolation_level=None, check_same_thread=False)
        try:
            await conn
        except sqlite3.Error as exc:
            # aiosqlite stops its thread on a failed open; let it finish while this
            # loop still runs, or it reports to a closed loop later.
            await asyncio.to_thread(conn._thread.join, 5.0)
            raise StoreUnavailable(f"cannot open SQLite database {self._path}: {exc}") from exc
        raw = conn._conn  # the stdlib connection; its users take turns via _owner
        try:
            try:
                await self._on_thread(
                    conn,
                    lambda: sync.open_database(  # keyword arguments: a lambda is clearer
                        raw,
                        target=self._path,
                        memory=self._memory,
                        read_only=self._read_only,
                        migrate=self._migrate,
                        busy_timeout_ms=self._busy_timeout_ms,
                        synchronous=self._synchronous,
                        migrations=migrations("sqlite"),
                        protocol_version_sql=_sql("protocol_version"),
                    ),
                )
            except sqlite3.Error as exc:
                # open_database raises a busy database as it is: locked, not broken.
                fault = sqlite_fault(exc, self._path, self._busy_timeout_ms)
                if fault is None:
                    fault = StoreUnavailable(f"cannot open SQLite database {self._path}: {exc}")
                raise fault from exc
            if not self._memory:
                self._reader = sync.open_reader(location, uri=uri, synchronous=self._synchronous)
                self._reader_at = (location, uri)
                if not self._read_only:
                    self._housekeeper = ThreadPoolExecutor(
                        1, thread_name_prefix="cairnq-checkpoint"
                    )
                    self._checkpointer = await asyncio.get_running_loop().run_in_executor(
                        self._housekeeper,
                        sync.open_checkpointer,
                        location,
                        uri,
                        self._synchronous,
                    )
        except BaseException:
            if self._housekeeper is not None:
                self._housekeeper.shutdown(wait=False)
                self._housekeeper = None
            await conn.close()
            raise
        self._next_statistics = time.monotonic() + _STATISTICS_EVERY_S
        self._post = self._poster(conn)
        self._group = GroupCommit(
            raw, self._owner, self._post, self._locked_error, self._wrote, inline=not self._offload
        )
        self._conn, self._raw = conn, raw
        if not self._memory:
            self._data_version()  # the baseline of later commit watches (~10 µs, inline)

    async def close(self) -> None:
        """A barrier: accepted writes land, then the connections close.

        Later calls (connect included) raise ``StoreClosed``; an in-memory
        database is gone for good.
        """
        if self._closed:
            return
        self._closed = True
        watches = list(self._watches.values())
        for watch in watches:
            watch.close()
        while self._inflight or (self._group is not None and not self._group.idle):
            if self._inflight:
                await self._idle.wait()
            else:
                await asyncio.sleep(0.001)  # the writer thread drains the last batch
        self.signals.release_all()
        if self._reader is not None:
            with self._reader_lock:
                self._reader.close()
            self._reader = None
        if self._inspect_thread is not None:
            await asyncio.get_running_loop().run_in_executor(
                self._inspect_thread, self._close_inspect_reader
            )
            self._inspect_thread.shutdown(wait=False)
            self._inspect_thread = None
        conn, self._conn, self._raw = self._conn, None, None
        checkpointer, self._checkpointer = self._checkpointer, None
        housekeeper, self._housekeeper = self._housekeeper, None
        if housekeeper is not None:
            loop = asyncio.get_running_loop()
            if checkpointer is not None:
                # After any checkpoint still queued there (FIFO), and any RESTART
                # one of them handed to the writer thread.
                await loop.run_in_executor(housekeeper, _forget)
                if conn is not None:
                    await self._on_thread(conn, _forget)
                await loop.run_in_executor(housekeeper, checkpointer.close)
            housekeeper.shutdown(wait=False)
        if conn is not None:
            await conn.close()
        for watch in watches:
            await watch.released()

    # -- plumbing --------------------------------------------------------------------

    @staticmethod
    async def _on_thread(conn: aiosqlite.Connection, fn: Callable[..., R], *args: Any) -> R:
        # aiosqlite.Connection._execute(fn, *args) runs a callable on the
        # connection's own thread. It is private but has been stable since
        # aiosqlite 0.11, and it is what lets a whole operation cost one round
        # trip to that thread instead of one per statement (docs/engine.md, "Stores").
        return cast(R, await cast(Any, conn)._execute(fn, *args))

    async def _ready(self) -> tuple[aiosqlite.Connection, sqlite3.Connection]:
        if self._closed:
            raise StoreClosed(f"store {self._path} is closed")
        if self._conn is None:
            await self.connect()
        assert self._conn is not None and self._raw is not None
        return self._conn, self._raw

    def _check_writable(self, what: str) -> None:
        if self._read_only:
            raise StoreUnavailable(f"store {self._path} is open read-only; {what} writes")

    def _locked_error(self, cause: BaseException | None = None) -> StoreLocked:
        """``StoreLocked`` for a write whose busy budget ran out (``cause``: SQLite's error)."""
        error = locked(self._path, self._busy_timeout_ms)
        error.__cause__ = cause if cause is not None else self._last_busy
        return error

    @contextlib.contextmanager
    def _faults(self) -> Iterator[None]:
        """Storage faults raised inside as engine errors (``_faults.sqlite_fault``)."""
        try:
            yield
        except sqlite3.Error as exc:
            fault = sqlite_fault(exc, self._path, self._busy_timeout_ms)
            if fault is None:
                raise
            raise fault from exc

    @staticmethod
    def _poster(conn: aiosqlite.Connection) -> Callable[[Callable[[], None]], None]:
        # Fire-and-forget work for the writer thread (a contended group-commit
        # drain, checkpoints, statistics), posted from plain callbacks and from
        # that thread itself, where aiosqlite's coroutine _execute cannot run.
        # This puts on the same private queue _execute uses; ``None`` = no
        # future to resolve, which aiosqlite's worker accepts.
        tx = cast(Any, conn)._tx

        def post(fn: Callable[[], None]) -> None:
            tx.put_nowait((None, fn))
            # aiosqlite's worker holds the last job it ran until the next one
            # arrives. A job that refers to this store (a drain, a COMMIT that
            # lets go of the connection) would keep a store nobody closed, and
            # so the non-daemon thread, alive forever: a no-op takes its place.
            tx.put_nowait((None, _forget))

        return post

    async def _session_free(self) -> None:
        """Wait until no claim session holds the connection's transaction."""
        while self._session_lock.locked():
            async with self._session_lock:
                pass

    async def _retrying(self, fn: Callable[..., R], *args: Any, commits: bool = True) -> R:
        """Run ``fn(raw, *args)`` on the writer connection, backing off on ``Busy``.

        Inline is safe because the writer's ``busy_timeout`` is 0: SQLite never
        waits here, it only does its own work (~0.1 ms for a transaction), and a
        lock held elsewhere comes back as ``sync.Busy`` at once, to be waited out
        by ``asyncio.sleep``. A ``fn`` that ``commits`` under ``synchronous=FULL``
        runs on the writer thread instead (its COMMIT waits for the disk). ``fn``
        starts and ends with no transaction open and raises ``Busy`` only when
        nothing was done (a bare statement or a BEGIN was refused). Raises
        ``StoreLocked`` once the budget is spent.
        """
        conn, raw = await self._ready()
        off_loop = commits and self._offload
        self._inflight += 1
        self._idle.clear()
        try:
            deadline = time.monotonic() + self._busy_timeout_ms / 1000
            attempt = 0
            ran = False
            waiting = False
            cause: BaseException | None = None
            while True:
                await self._session_free()
                # Not owned: another thread's loop is flushing, or the writer
                # thread is waiting out a lock for queued writes. Both are brief,
                # and a drain lets a caller that waits for it go next.
                owned = self._owner.acquire(blocking=False)
                waiting = self._still_waiting(waiting, owned)
                if owned:
                    if off_loop:
                        try:
                            # The thread lets go of the connection itself, so a
                            # cancelled caller cannot free it while it is in use.
                            with self._faults():
                                return await self._on_thread(
                                    conn, self._then_release, fn, raw, *args
                                )
                        except sync.Busy as busy:
                            cause = self._last_busy = busy.__cause__
                    else:
                        try:
                            with self._faults():
                                result = fn(raw, *args)
                        except sync.Busy as busy:
                            cause = self._last_busy = busy.__cause__
                        else:
                            ran = True
                        finally:
                            self._release_owner()
                        if ran:
                            await _yield_loop()  # after letting go of the connection
                            return result
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise self._locked_error(cause)
                await asyncio.sleep(min(backoff(attempt), remaining))
                attempt += 1
        finally:
            self._still_waiting(waiting, True)
            self._inflight -= 1
            if not self._inflight:
                self._idle.set()

    def _still_waiting(self, was_waiting: bool, owned: bool) -> bool:
        """Tell the group when this caller starts or stops waiting for the connection."""
        waiting = not owned
        if waiting != was_waiting and self._group is not None:
            self._group.waiting(1 if waiting else -1)
        return waiting

    def _then_release(self, fn: Callable[..., R], *args: Any) -> R:
        """On the writer thread: ``fn(*args)``, then let go of the connection."""
        try:
            return fn(*args)
        finally:
            self._release_owner()
            if self._post is not None:
                self._post(_forget)  # this job refers to the store: see _poster

    def _release_owner(self) -> None:
        self._owner.release()
        if self._group is not None:
            self._group.kick()  # writes another thread queued while we held it
        self._wrote()

    def _housekeep(self, job: Callable[[], None]) -> None:
        """Run ``job`` (a checkpoint, statistics) on the housekeeping thread, FIFO."""
        housekeeper = self._housekeeper
        if housekeeper is None:
            return
        with contextlib.suppress(RuntimeError):  # shut down by close() just now
            housekeeper.submit(job)

    def _wrote(self) -> None:
        """Count a write transaction; every so often checkpoint the WAL off-loop.

        The writer's automatic checkpoint is off: it would run inside an inline
        commit and fsync on the event loop (measured: 1% of submits took 2.5 ms).
        Passive checkpoints run on the housekeeping thread instead, one at a
        time and alongside the writer thread's commits, not queued in line with
        them: there each took 3 ms or more of disk time (two fsyncs) that the
        next commit waited behind, ~25 % of a sequential submit's time under
        FULL (bench/README.md). Once the WAL passed ``WAL_RESTART_FRAMES``, the
        RESTART that rewinds it goes to the writer thread, between commits:
        from another thread it made this store's writers meet SQLITE_BUSY and
        sleep through backoffs. Until it ran, no other checkpoint is queued (and
        the checkpointer connection is used by one thread at a time).
        """
        self._writes += 1
        if (
            self._writes < _CHECKPOINT_EVERY
            or self._checkpoint_queued
            or self._checkpointer is None
        ):
            return
        self._writes = 0
        self._checkpoint_queued = True
        checkpointer = self._checkpointer

        def restart() -> None:
            # On the writer thread. Whoever holds the writer connection may have
            # a transaction open whose COMMIT is queued on this very thread,
            # behind this job: a RESTART would wait its whole busy timeout for
            # that writer (measured: a 250 ms stall every 32 worker cycles). So
            # it runs only while it holds the connection itself, else after the
            # next write.
            try:
                if not self._owner.acquire(blocking=False):
                    self._writes = _CHECKPOINT_EVERY
                    return
                try:
                    sync.checkpoint_restart(checkpointer)
                finally:
                    self._owner.release()
                    if self._group is not None:
                        self._group.kick()  # writes queued while the checkpoint held it
            finally:
                self._checkpoint_queued = False

        def run() -> None:
            frames = sync.checkpoint_passive(checkpointer)
            post = self._post
            if frames is None or frames < WAL_RESTART_FRAMES or post is None or self._closed:
                self._checkpoint_queued = False
                return
            post(restart)

        self._housekeep(run)

    async def _fetch(self, sql: str, params: dict[str, Any]) -> sync.Rows:
        """A read: inline on the reader when it can answer at once, else on the writer."""
        if self._closed or self._conn is None:
            await self._ready()
        reader = self._reader
        if reader is not None and self._reader_lock.acquire(blocking=False):
            rows: sync.Rows | None = None
            try:
                with self._faults():
                    try:
                        rows = reader.execute(sql, params).fetchall()
                    except sqlite3.OperationalError as exc:
                        if not sync.is_busy(exc):
                            raise
            finally:
                self._reader_lock.release()
            if rows is not None:
                await _yield_loop()
                return rows
        return await self._retrying(sync.fetch, sql, params, commits=False)

    async def _write(self, sql: str, params: dict[str, Any]) -> tuple[int, sync.Rows]:
        """A single-statement write through group commit; ``(now_ms, rows)`` after COMMIT."""
        if self._group is None or self._closed:
            await self._ready()
        assert self._group is not None
        with self._faults():
            return await self._group.submit(sql, params, self._busy_timeout_ms / 1000)

    def _refresh_statistics_if_due(self) -> None:
        """Planner statistics at most every 60 s, on the housekeeping thread (never inline).

        The slot is reserved first so concurrent claims do not all refresh.
        """
        now = time.monotonic()
        if now < self._next_statistics or self._checkpointer is None:
            return
        self._next_statistics = now + _STATISTICS_EVERY_S
        checkpointer = self._checkpointer
        self._housekeep(lambda: sync.refresh_statistics_waiting(checkpointer))

    # -- submit ----------------------------------------------------------------------

    async def _submit(self, new: NewTask) -> SubmitOutcome:
        self._check_writable("submit")
        params = insert_params(new)
        if new.key is None:
            now, _ = await self._write(_sql("insert_task"), params)
            return SubmitOutcome(self._submitted(new, now), "created")
        result = await self._retrying(_keyed_submit, new.key, new.conflict, params)
        if isinstance(result, AlreadyExists):
            raise result
        inserted_at, holder, canceled = result
        if inserted_at is None:
            assert holder is not None
            return SubmitOutcome(_task(holder), "reused")
        task = self._submitted(new, inserted_at)
        if holder is None:
            return SubmitOutcome(task, "created")
        previous = _task(canceled if canceled is not None else holder)
        return SubmitOutcome(task, "replaced", previous, canceled=canceled is not None)

    @staticmethod
    def _submitted(new: NewTask, now: int) -> Task:
        """The inserted row, built from the values bound (no read-back)."""
        return Task(
            id=new.id,
            name=new.name,
            queue=new.queue,
            status="queued",
            payload=_json.loads(new.payload_json),
            metadata=_json.loads(new.metadata_json),
            result=None,
            error=None,
            progress=None,
            message=None,
            attempt=0,
            max_attempts=new.max_attempts,
            priority=new.priority,
            worker_id=None,
            lease_until_ms=None,
            run_at_ms=now + new.delay_ms,
            cancel_requested_at_ms=None,
            parent_id=new.parent_id,
            root_id=new.root_id,
            correlation_id=new.correlation_id,
            created_at_ms=now,
            updated_at_ms=now,
            completed_at_ms=None,
        )

    # -- reads -----------------------------------------------------------------------

    async def _get(self, task_id: str) -> Task | None:
        return _first_task(await self._fetch(_sql("get"), {"id": task_id}))

    async def _get_by_key(self, key: str) -> Task | None:
        return _first_task(await self._fetch(_sql("get_by_key"), {"key": key}))

    async def _get_status(self, task_id: str) -> TaskRef | None:
        rows = await self._fetch(_sql("get_status"), {"id": task_id})
        return TaskRef(rows[0][0], rows[0][1]) if rows else None

    async def _get_status_by_key(self, key: str) -> TaskRef | None:
        rows = await self._fetch(_sql("get_status_by_key"), {"key": key})
        return TaskRef(rows[0][0], rows[0][1]) if rows else None

    async def _list(
        self, filters: dict[str, str | None], limit: int, offset: int
    ) -> builtins.list[Task]:
        sql = specialise(_sql("list"), frozenset(k for k, v in filters.items() if v is not None))
        rows = await self._fetch(sql, {**filters, "limit": limit, "offset": offset})
        return [_task(r) for r in rows]

    async def _stats(self, queue: str | None) -> builtins.list[tuple[str, str, int]]:
        sql = specialise(_sql("stats"), frozenset() if queue is None else frozenset({"queue"}))
        return [(r[0], r[1], r[2]) for r in await self._fetch(sql, {"queue": queue})]

    async def _queue_depth(self, queue: str, max_depth: int) -> int:
        rows = await self._fetch(_sql("queue_depth"), {"queue": queue, "max_depth": max_depth})
        return int(rows[0][0])

    async def protocol_version(self) -> int:
        """The database's ``protocol_version`` (0 when the row is missing)."""
        rows = await self._fetch(_sql("protocol_version"), {})
        return int(rows[0][0]) if rows else 0

    async def read_statement(
        self, name: str, params: Mapping[str, Any]
    ) -> builtins.list[dict[str, Any]]:
        """Run the read-only statement ``sql/sqlite/<name>.sql``; rows as dicts.

        Raises:
            ValueError: unknown name, or the statement is not a read.
        """
        text = self._read_statement_text(name)
        bound = dict(params)
        sql = specialise(text, frozenset(k for k, v in bound.items() if v is not None))
        if self._closed or self._conn is None:
            await self._ready()
        if self._reader_at is not None:
            if self._inspect_thread is None:
                self._inspect_thread = ThreadPoolExecutor(1, thread_name_prefix="cairnq-inspect")
            with self._faults():
                return await asyncio.get_running_loop().run_in_executor(
                    self._inspect_thread, self._inspect_read, sql, bound
                )
        names, rows = await self._retrying(sync.fetch_described, sql, bound, commits=False)
        return [dict(zip(names, row, strict=True)) for row in rows]

    def _inspect_read(self, sql: str, params: dict[str, Any]) -> builtins.list[dict[str, Any]]:
        """On the inspect thread: one read on its own connection, opened on first use."""
        if self._inspect_reader is None:
            assert self._reader_at is not None
            location, uri = self._reader_at
            self._inspect_reader = sync.open_reader(
                location, uri=uri, synchronous=self._synchronous
            )
            # Off the loop a read may wait out a checkpoint or WAL recovery.
            self._inspect_reader.execute(f"pragma busy_timeout = {int(self._busy_timeout_ms)}")
        cursor = self._inspect_reader.execute(sql, params)
        rows = cursor.fetchall()
        names = [d[0] for d in cursor.description or ()]
        return [dict(zip(names, row, strict=True)) for row in rows]

    def _close_inspect_reader(self) -> None:
        if self._inspect_reader is not None:
            self._inspect_reader.close()
            self._inspect_reader = None

    # -- cancel / retry / purge ---------------------------------------------------------

    async def _cancel(self, task_id: str) -> Task | None:
        self._check_writable("cancel")
        _, rows = await self._write(_sql("cancel"), {"id": task_id})
        return _first_task(rows)

    async def _retry(self, task_id: str, reset_attempt: bool) -> Task | None:
        self._check_writable("retry")
        params = {"id": task_id, "reset_attempt": int(reset_attempt)}
        _, rows = await self._write(_sql("retry"), params)
        return _first_task(rows)

    async def _purge_ids(self, task_ids: builtins.list[str]) -> builtins.list[str]:
        self._check_writable("purge")
        _, rows = await self._write(_sql("purge_ids"), {"ids": _json.dumps(task_ids)})
        return [r[0] for r in rows]

    async def _reschedule(
        self, statement: str, task_id: str, params: dict[str, Any]
    ) -> Task | None:
        self._check_writable(statement)
        _, rows = await self._write(_sql(statement), {"id": task_id, **params})
        return _first_task(rows)

    async def _by_key(self, key: str, name: str, extra: dict[str, Any]) -> Task | None:
        """lock_key, get_key, then one statement on the task, in one transaction."""
        self._check_writable(name)
        rows = await self._retrying(_keyed_update, key, _sql(name), extra)
        return _first_task(rows)

    async def _cancel_by_key(self, key: str) -> Task | None:
        return await self._by_key(key, "cancel", {})

    async def _retry_by_key(self, key: str, reset_attempt: bool) -> Task | None:
        return await self._by_key(key, "retry", {"reset_attempt": int(reset_attempt)})

    async def _purge(
        self, older_than_ms: int, filters: dict[str, str | None], limit: int
    ) -> builtins.list[str]:
        self._check_writable("purge")
        sql = purge_statement(frozenset(k for k, v in filters.items() if v is not None))
        params = {**filters, "older_than_ms": older_than_ms, "limit": limit}
        _, rows = await self._write(sql, params)
        return [r[0] for r in rows]

    # -- wakeups ----------------------------------------------------------------------------

    def arm_claim_wake(self, queues: Sequence[str]) -> Wake:
        """A wake for a task that may be claimable on ``queues`` (see the base class).

        Fired by a submit in this process, or by another process's commit
        (``_sqlite_commits``: a file-change notification, else a ~15 ms poll).
        """
        return self._with_commits(self.signals.arm_claim(queues))

    def arm_task_done_wake(self, task_id: str) -> Wake:
        """A wake for ``task_id`` going terminal; fired as ``arm_claim_wake``'s is."""
        return self._with_commits(self.signals.arm_done(task_id))

    def _with_commits(self, wake: Wake) -> Wake:
        """Add another connection's next commit to what fires ``wake``."""
        if self._memory or self._closed or self._raw is None:
            return wake  # an in-memory database has no other connection
        watch = self._watches.get(wake.loop)
        if watch is None:
            # A URI's file is not a plain path: watch it by polling.
            path = None if self._uri else os.path.realpath(self._path)
            watch = self._watches[wake.loop] = CommitWatch(
                self._data_version, path, self._last_version
            )
        watch.add(wake)
        return wake

    def _data_version(self) -> int | None:
        """The writer's ``data_version`` (unchanged by its own commits); None if busy."""
        raw = self._raw
        if raw is None or not self._owner.acquire(blocking=False):
            return None
        try:
            row = raw.execute("pragma data_version").fetchone()
        except sqlite3.Error:
            return None
        finally:
            self._owner.release()
            if self._group is not None:
                self._group.kick()  # a drain that found the connection taken gave up
        self._last_version = int(row[0])
        return self._last_version

    # -- claims --------------------------------------------------------------------------

    async def _probe(self, queues: builtins.list[str], names: builtins.list[str] | None) -> bool:
        params = {
            "queues": _json.dumps(queues),
            "names": None if names is None else _json.dumps(names),
            "now_ms": now_ms(),
        }
        rows = await self._fetch(_sql("claimable_probe"), params)
        return bool(rows and rows[0][0])

    def _announce_recovered(self, rows: sync.Rows) -> None:
        for row in rows:
            self._after_write(_task(row))

    async def claim(
        self,
        *,
        queues: Sequence[str],
        worker_id: str,
        lease_ms: int = 30_000,
        limit: int = 1,
        names: Sequence[str] | None = None,
    ) -> builtins.list[Task]:
        """A claim session with one draw (§4.14), run as one writer-thread call.

        Returns the claimed tasks in claim order; empty when the probe found
        nothing, ``limit == 0`` or ``names == []``.

        Raises:
            ValueError: as ``TaskStore.claim`` (a negative limit included).
        """
        args = self._check_claim(queues, worker_id, lease_ms, names)
        draw = self._draw_variant(args.queues, args.names, limit)
        if draw is None:
            return []
        self._check_writable("claim")
        if not await self._probe(args.queues, args.names):
            return []
        sql, params = _claim_statement(*draw)
        params.update(worker_id=args.worker_id, lease_ms=args.lease_ms)
        steps = [
            (_sql("recover_leases"), {"lease_expired_error": LEASE_EXPIRED_JSON}),
            (sql, params),
        ]
        self._refresh_statistics_if_due()
        recovered, claimed = await self._retrying(sync.transaction, steps)
        self._announce_recovered(recovered)
        tasks = in_claim_order(_task(r) for r in claimed)
        set_aside = [task for task in tasks if undecodable(task)]
        if not set_aside:
            return tasks
        # Never handed out: failed for good, and the shortfall claimed again.
        await self._fail_undecodable(set_aside)
        kept = [task for task in tasks if not undecodable(task)]
        if len(tasks) == limit:
            kept += await self.claim(
                queues=args.queues,
                worker_id=args.worker_id,
                lease_ms=args.lease_ms,
                limit=len(set_aside),
                names=args.names,
            )
        return kept

    async def _claim_session(
        self,
        queues: builtins.list[str],
        worker_id: str,
        lease_ms: int,
        names: builtins.list[str] | None,
        plan: Plan[T],
    ) -> tuple[T, builtins.list[Task]] | None:
        self._check_writable("claim_session")
        if not await self._probe(queues, names):
            return None
        conn, raw = await self._ready()
        self._inflight += 1
        self._idle.clear()
        try:
            return await self._run_session(conn, raw, queues, worker_id, lease_ms, plan)
        finally:
            self._inflight -= 1
            if not self._inflight:
                self._idle.set()

    async def _run_session(
        self,
        conn: aiosqlite.Connection,
        raw: sqlite3.Connection,
        queues: builtins.list[str],
        worker_id: str,
        lease_ms: int,
        plan: Plan[T],
    ) -> tuple[T, builtins.list[Task]]:
        recover = _sql("recover_leases")
        recover_params = {"lease_expired_error": LEASE_EXPIRED_JSON}
        recovered = await self._begin_session(lambda: sync.begin_with(raw, recover, recover_params))
        try:
            with self._faults():
                value = await self._plan_and_commit(conn, raw, queues, worker_id, lease_ms, plan)
        finally:
            self._end_session()
        await _yield_loop()
        return value, [_task(row) for row in recovered]

    async def _begin_session(self, begin: Callable[[], R]) -> R:
        """Take the session lock and the connection, then ``begin()`` (inline).

        Backs off while ``begin`` raises ``sync.Busy`` (BEGIN refused, nothing
        done) until ``busy_timeout_ms`` is spent. On return the caller holds
        the session lock and the connection, and ``begin`` left its
        transaction open (or ended it, if it says so in its value).
        """
        deadline = time.monotonic() + self._busy_timeout_ms / 1000
        attempt = 0
        self._refresh_statistics_if_due()
        waiting = False
        cause: BaseException | None = None
        try:
            while True:
                await self._session_lock.acquire()
                # Inline, like _retrying: nothing here waits inside SQLite.
                owned = self._owner.acquire(blocking=False)
                waiting = self._still_waiting(waiting, owned)
                if owned:
                    try:
                        with self._faults():
                            return begin()
                    except sync.Busy as busy:
                        cause = self._last_busy = busy.__cause__
                        self._owner.release()
                    except BaseException:
                        self._owner.release()
                        self._end_session()
                        raise
                self._end_session()
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise self._locked_error(cause)
                await asyncio.sleep(min(backoff(attempt), remaining))
                attempt += 1
        finally:
            self._still_waiting(waiting, True)

    async def _plan_and_commit(
        self,
        conn: aiosqlite.Connection,
        raw: sqlite3.Connection,
        queues: builtins.list[str],
        worker_id: str,
        lease_ms: int,
        plan: Plan[T],
    ) -> T:
        """Run ``plan`` in the open session transaction, then COMMIT and let go.

        Whatever happens, the connection is released with no transaction open
        (the session lock stays the caller's). A failed plan or COMMIT rolls
        everything back and raises.
        """

        async def draw(draw_names: Sequence[str] | None, limit: int) -> builtins.list[Task]:
            variant = self._draw_variant(queues, draw_names, limit)
            if variant is None:
                return []
            sql, params = _claim_statement(*variant)
            params.update(worker_id=worker_id, lease_ms=lease_ms)
            return in_claim_order(_task(r) for r in sync.run(raw, sql, params))

        try:
            value = await plan(draw)
        except BaseException:
            # Even a cancelled session leaves no transaction open.
            sync.rollback(raw)
            self._release_owner()
            raise
        # sync.commit rolls back by itself if the COMMIT fails.
        if self._offload:
            # A COMMIT that fsyncs waits on the writer thread, which lets go
            # of the connection after it even if this caller is cancelled.
            await self._on_thread(conn, self._then_release, sync.commit, raw)
        else:
            try:
                sync.commit(raw)
            finally:
                self._release_owner()
        return value

    async def _completing_claim(
        self, ids: builtins.list[str], args: ClaimArgs, plan: Plan[T], single_draw: bool
    ) -> CompletingClaim[T] | Exception:
        """One ``BEGIN IMMEDIATE``: complete, recover, ``plan``, COMMIT (see the base class).

        ``single_draw`` saves a round trip on Postgres; SQLite has none to save.
        Raises ``StoreLocked`` if the database stayed locked for ``busy_timeout_ms``.
        """
        del single_draw
        conn, raw = await self._ready()
        settle = (_sql("complete_many"), {"ids": _json.dumps(ids), "worker_id": args.worker_id})
        recover = (_sql("recover_leases"), {"lease_expired_error": LEASE_EXPIRED_JSON})
        self._inflight += 1
        self._idle.clear()
        try:
            started = await self._begin_session(lambda: sync.begin_settling(raw, settle, recover))
            value: T | None = None
            try:
                if isinstance(started, Exception):
                    # The statements were rolled back with their transaction.
                    self._release_owner()
                    return started
                try:
                    with self._faults():
                        value = await self._plan_and_commit(
                            conn, raw, args.queues, args.worker_id, args.lease_ms, plan
                        )
                except Exception as exc:
                    return exc
            finally:
                self._end_session()
        finally:
            self._inflight -= 1
            if not self._inflight:
                self._idle.set()
        settled_rows, recovered = started
        await _yield_loop()
        return CompletingClaim(
            {row[0] for row in settled_rows}, value, None, [_task(r) for r in recovered]
        )

    def _end_session(self) -> None:
        self._session_lock.release()

    # -- owned writes ----------------------------------------------------------------------

    async def _owned(self, name: str, task_id: str, worker_id: str, extra: dict[str, Any]) -> Task:
        """An ownership-checked single-statement write; no row means ``LostLease``."""
        self._check_writable(name)
        _, rows = await self._write(_sql(name), {"id": task_id, "worker_id": worker_id, **extra})
        if not rows:
            raise LostLease(task_id)
        return _task(rows[0])

    async def _heartbeat(self, task_id: str, worker_id: str, lease_ms: int) -> Task:
        return await self._owned("heartbeat", task_id, worker_id, {"lease_ms": lease_ms})

    async def _heartbeat_batch(
        self, task_ids: builtins.list[str], worker_id: str, lease_ms: int
    ) -> dict[str, bool]:
        self._check_writable("heartbeat_batch")
        params = {"ids": _json.dumps(task_ids), "worker_id": worker_id, "lease_ms": lease_ms}
        _, rows = await self._write(_sql("heartbeat_batch"), params)
        return {row[0]: row[1] is not None for row in rows}

    async def _progress(
        self, task_id: str, worker_id: str, progress: float | None, message: str | None
    ) -> Task:
        extra = {"progress": progress, "message": message}
        return await self._owned("progress", task_id, worker_id, extra)

    async def _succeed(self, task_id: str, worker_id: str, result_json: str | None) -> Task:
        return await self._owned(
            "succeed", task_id, worker_id, {"result": result_json, "message": None}
        )

    async def _complete(self, task_id: str, worker_id: str, result_json: str | None) -> Task:
        return await self._owned("complete", task_id, worker_id, {"result": result_json})

    async def _complete_many(self, task_ids: builtins.list[str], worker_id: str) -> set[str]:
        self._check_writable("complete_many")
        params = {"ids": _json.dumps(task_ids), "worker_id": worker_id}
        _, rows = await self._write(_sql("complete_many"), params)
        return {row[0] for row in rows}

    async def _fail(
        self, task_id: str, worker_id: str, error_json: str, retryable: bool, delay_ms: int
    ) -> Task:
        extra = {"error": error_json, "retryable": int(retryable), "delay_ms": delay_ms}
        return await self._owned("fail", task_id, worker_id, extra)


# -- transactions (run inline by _retrying) ------------------------------------------------------


def _keyed_submit(
    raw: sqlite3.Connection, key: str, conflict: str, params: dict[str, Any]
) -> tuple[int | None, tuple[Any, ...] | None, tuple[Any, ...] | None] | AlreadyExists:
    """§4.3 in one ``BEGIN IMMEDIATE``, deciding by ``keyed_choice``.

    Returns ``(now_ms, holder, canceled)``: ``now_ms`` None when the key's task
    (``holder``) is handed back, else the insert's clock, with the key's
    previous holder (None if it was free) and that holder as the cancel left
    it (None if not canceled); or an ``AlreadyExists`` for ``reject``
    (rolled back).
    """
    sync.begin(raw)
    try:
        now = now_ms()
        key_params = {"key": key, "now_ms": now}
        raw.execute(_sql("lock_key"), key_params).fetchall()
        pointer = raw.execute(_sql("get_key"), key_params).fetchone()
        holder = None
        if pointer is not None:
            # Re-read inside the transaction: a purge may have removed the task.
            holder = raw.execute(_sql("get"), {"id": pointer[0]}).fetchone()
        choice = keyed_choice(conflict, None if holder is None else holder[3])
        if choice == "reject":
            assert holder is not None
            sync.rollback(raw)
            return AlreadyExists(key, holder[0], holder[3])
        if choice == "reuse":
            sync.commit(raw)
            return (None, holder, None)
        canceled = None
        if choice == "cancel-and-insert":
            assert holder is not None
            rows = raw.execute(_sql("cancel"), {"id": holder[0], "now_ms": now}).fetchall()
            canceled = rows[0] if rows else None
        sync.stamp(params, now)
        raw.execute(_sql("insert_task"), params).fetchall()
        raw.execute(
            _sql("upsert_key"), {"key": key, "task_id": params["id"], "now_ms": now}
        ).fetchall()
        sync.commit(raw)
    except BaseException:
        sync.rollback(raw)
        raise
    return (now, holder, canceled)


def _keyed_update(raw: sqlite3.Connection, key: str, sql: str, extra: dict[str, Any]) -> sync.Rows:
    """``cancel_by_key`` / ``retry_by_key``: lock_key, get_key, the statement."""
    sync.begin(raw)
    try:
        now = now_ms()
        raw.execute(_sql("lock_key"), {"key": key}).fetchall()
        pointer = raw.execute(_sql("get_key"), {"key": key}).fetchone()
        rows: sync.Rows = []
        if pointer is not None:
            rows = raw.execute(sql, {"id": pointer[0], "now_ms": now, **extra}).fetchall()
        sync.commit(raw)
    except BaseException:
        sync.rollback(raw)
        raise
    return rows


__all__ = ["SQLiteStore"]
