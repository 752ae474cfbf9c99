"""The SQLite store's writer connection: who may use it, where its work runs, its WAL.

One ``sqlite3`` connection writes for a store. Its users take turns through a
threading lock (``owner``): an operation or a group-commit flush inline on some
event loop, the writer thread (``_sqlite_thread``) running a COMMIT that fsyncs
or a drain, a claim session holding a transaction open between its draws.

* **Inline, on the caller's loop.** After the open sequence the connection's
  ``busy_timeout`` is 0, so SQLite never waits on a lock: a statement does its
  own work (a WAL commit without fsync is ~0.03 ms, cheaper than a hop to a
  thread) or reports busy at once. A busy database is waited out with
  ``asyncio.sleep`` backoff (1 ms doubling to 10 ms, jittered) until the
  caller's ``busy_timeout_ms`` is spent.
* **On the writer thread**: opening and migrating (they wait on
  ``busy_timeout``), every COMMIT that fsyncs (``synchronous=FULL`` on a file:
  group-commit batches, transactions, a claim session's COMMIT), drains that
  wait out another process's lock. The loop only waits for the answer.
* **A housekeeping thread** with a connection of its own runs passive WAL
  checkpoints (the writer's automatic checkpoint would fsync inside an inline
  commit) and planner statistics, beside the writer thread's commits rather
  than queued in line with them. The RESTART that rewinds a long WAL is handed
  to the writer thread, between commits.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from engine._errors import StoreUnavailable
from engine.store import _sqlite_sync as sync
from engine.store._sqlite_group import GroupCommit, backoff
from engine.store._sqlite_pragmas import connect_timeout
from engine.store._sqlite_thread import WriterThread

R = TypeVar("R")

_STATISTICS_EVERY_S = 60.0
#: Write transactions between two WAL checkpoints (see ``SQLiteWriter._wrote``).
_CHECKPOINT_EVERY = 32
#: WAL frames (pages; 4 KiB by default) past which a checkpoint restarts the
#: WAL instead of only copying it (``_sqlite_sync.checkpoint_restart``): ~8 MiB.
WAL_RESTART_FRAMES = 2048
#: Under NORMAL, how long a due RESTART waits for the loop's inline work to let go.
_RESTART_OWNER_WAIT_S = 0.05


#: An inline operation gives its loop a turn if this thread's last such turn
#: is older than this (``yield_loop``).
TURN_EVERY_S = 0.0001
_turns = threading.local()
_clock = time.monotonic  # tests drive it


async def yield_loop() -> None:
    """Give the event loop a turn after an operation that ran inline: at least every 0.1 ms.

    An inline read or transaction finishes without awaiting anything, so a task
    looping on store calls would otherwise never let timers, heartbeats or
    other tasks' commits (a group-commit flush, a claim session between draws)
    run. A turn (``sleep(0)``: one pass of the loop, its ``epoll_wait``
    included) costs about half of a primary-key read (~4 µs against ~9 µs;
    bench/README.md), so it is given only when this thread's loop had none from
    here for ``TURN_EVERY_S``: a task looping on reads holds its loop for
    0.1 ms at most (a timer fires a few tenths of a millisecond late at
    worst), and ten reads or so share one turn.
    """
    if _clock() - getattr(_turns, "at", -math.inf) < TURN_EVERY_S:
        return
    await asyncio.sleep(0)
    _turns.at = _clock()


class SQLiteWriter:
    """The writer connection of one store, and the threads that work for it.

    Args:
        target: the path as the caller gave it (for messages).
        memory: an in-memory database (no WAL, nothing to checkpoint).
        read_only: nothing is migrated; no housekeeping.
        busy_timeout_ms: how long a write may wait for another connection's lock.
        synchronous: ``"full"`` or ``"normal"``.
        locked_error: the error for a caller whose busy budget ran out, given
            SQLite's last busy error as its cause.
    """

    def __init__(
        self,
        *,
        target: str,
        memory: bool,
        read_only: bool,
        busy_timeout_ms: int,
        synchronous: str,
        locked_error: Callable[[BaseException | None], BaseException],
    ) -> None:
        self._target = target
        self._memory = memory
        self._read_only = read_only
        self._busy_timeout_ms = busy_timeout_ms
        self._synchronous = synchronous
        self._locked_error = locked_error
        # A COMMIT that fsyncs (FULL, on a file) runs on the writer thread, not
        # inline: a millisecond or more of disk wait must not hold the loop.
        self.offload = synchronous == "full" and not memory
        self._thread: WriterThread | None = None
        #: The connection (serialized threading mode); used by whoever holds ``_owner``.
        self.raw: sqlite3.Connection | None = None
        # Held for a whole claim session, whose transaction stays open while its
        # plan awaits between draws: no other operation of this loop may join it.
        self._session_lock = asyncio.Lock()
        # Held by whoever uses the connection right now: an operation or
        # group-commit flush inline on some loop, or the writer thread's drain.
        self._owner = threading.Lock()
        self._group: GroupCommit | None = None
        self._checkpointer: sqlite3.Connection | None = None
        # Checkpoints and statistics run on a thread of their own (``_housekeep``),
        # never in line with the writer thread's commits.
        self._housekeeper: ThreadPoolExecutor | None = None
        self._writes = 0
        self._checkpoint_queued = False
        self._next_statistics = 0.0
        self._inflight = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._closing = False
        #: ``data_version`` as last read (at open, then by commit watches).
        self.last_version: int | None = None

    # -- opening and closing -------------------------------------------------------------

    async def open(
        self,
        location: str,
        uri: bool,
        *,
        migrate: bool,
        migrations: Sequence[tuple[str, str]],
        protocol_version_sql: str,
    ) -> None:
        """Connect on the writer thread and run the open sequence there (it may wait).

        Raises:
            StoreUnavailable, ProtocolVersionMismatch, SchemaMismatch: as
                ``_sqlite_sync.open_database``; the thread is stopped again.
        """
        thread = WriterThread()
        raw: sqlite3.Connection | None = None
        try:
            try:
                raw = await thread.call(
                    lambda: sqlite3.connect(
                        location,
                        uri=uri,
                        timeout=connect_timeout(self._busy_timeout_ms),
                        isolation_level=None,
                        check_same_thread=False,
                    )
                )
            except sqlite3.Error as exc:
                raise StoreUnavailable(
                    f"cannot open SQLite database {self._target}: {exc}"
                ) from exc
            opened = raw
            await thread.call(
                lambda: sync.open_database(  # keyword arguments: a lambda is clearer
                    opened,
                    target=self._target,
                    memory=self._memory,
                    read_only=self._read_only,
                    migrate=migrate,
                    synchronous=self._synchronous,
                    migrations=migrations,
                    protocol_version_sql=protocol_version_sql,
                )
            )
            if not self._memory and not self._read_only:
                self._housekeeper = ThreadPoolExecutor(1, thread_name_prefix="cairnq-checkpoint")
                self._checkpointer = await asyncio.get_running_loop().run_in_executor(
                    self._housekeeper, sync.open_checkpointer, location, uri, self._synchronous
                )
        except BaseException:
            if self._housekeeper is not None:
                self._housekeeper.shutdown(wait=False)
                self._housekeeper = None
            if raw is not None:
                await thread.call(raw.close)
            await thread.stop()
            raise
        self._next_statistics = time.monotonic() + _STATISTICS_EVERY_S
        self._thread = thread
        assert raw is not None
        self._group = GroupCommit(
            raw, self._owner, thread.post, self._locked_error, self._wrote, inline=not self.offload
        )
        self.raw = raw
        if not self._memory:
            self.data_version()  # the baseline of later commit watches (~10 µs, inline)

    async def drain(self) -> None:
        """Return once no operation is in flight and every accepted write landed."""
        self._closing = True
        while self._inflight or (self._group is not None and not self._group.idle):
            if self._inflight:
                await self._idle.wait()
            else:
                await asyncio.sleep(0.001)  # the writer thread drains the last batch

    async def close(self) -> None:
        """Close the connections and stop the threads (after ``drain``)."""
        self._closing = True
        thread, self._thread = self._thread, None
        raw, self.raw = self.raw, None
        checkpointer, self._checkpointer = self._checkpointer, None
        housekeeper, self._housekeeper = self._housekeeper, None
        if housekeeper is not None:
            loop = asyncio.get_running_loop()
            if checkpointer is not None:
                # After any checkpoint still queued there (FIFO), and any RESTART
                # one of them handed to the writer thread.
                await loop.run_in_executor(housekeeper, _nothing)
                if thread is not None:
                    await thread.call(_nothing)
                await loop.run_in_executor(housekeeper, checkpointer.close)
            housekeeper.shutdown(wait=False)
        if thread is not None:
            if raw is not None:
                await thread.call(raw.close)
            await thread.stop()

    # -- running operations --------------------------------------------------------------

    @contextlib.contextmanager
    def in_flight(self) -> Iterator[None]:
        """Mark an operation that ``drain`` must wait for."""
        self._inflight += 1
        self._idle.clear()
        try:
            yield
        finally:
            self._inflight -= 1
            if not self._inflight:
                self._idle.set()

    def write(self, sql: str, params: dict[str, Any]) -> asyncio.Future[tuple[int, sync.Rows]]:
        """A single-statement write through group commit; ``(now_ms, rows)`` after COMMIT."""
        assert self._group is not None
        return self._group.submit(sql, params, self._busy_timeout_ms / 1000)

    async def run(self, fn: Callable[..., R], *args: Any, commits: bool = True) -> R:
        """Run ``fn(raw, *args)`` on the connection, backing off on ``Busy``.

        Inline is safe because ``busy_timeout`` is 0: SQLite never waits here,
        it only does its own work (~0.1 ms for a transaction), and a lock held
        elsewhere comes back as ``sync.Busy`` at once, to be waited out by
        ``asyncio.sleep``. A ``fn`` that ``commits`` under ``synchronous=FULL``
        runs on the writer thread instead (its COMMIT waits for the disk).
        ``fn`` starts and ends with no transaction open and raises ``Busy``
        only when nothing was done (a bare statement or a BEGIN was refused).
        Raises the store's locked error once the budget is spent.
        """
        raw, thread = self.raw, self._thread
        assert raw is not None and thread is not None
        off_loop = commits and self.offload
        with self.in_flight():
            deadline = time.monotonic() + self._busy_timeout_ms / 1000
            attempt = 0
            waiting = False
            cause: BaseException | None = None
            try:
                while True:
                    await self.session_free()
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
                                return await thread.call(self._then_release, fn, raw, *args)
                            except sync.Busy as busy:
                                cause = busy.__cause__
                        else:
                            try:
                                result = fn(raw, *args)
                            except sync.Busy as busy:
                                cause = busy.__cause__
                                self.release()
                            except BaseException:
                                self.release()
                                raise
                            else:
                                self.release()
                                await yield_loop()  # after letting go of the connection
                                return result
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise self._locked_error(cause)
                    await asyncio.sleep(min(backoff(attempt), remaining))
                    attempt += 1
            finally:
                self._still_waiting(waiting, True)

    async def session_free(self) -> None:
        """Wait until no claim session holds the connection's transaction."""
        while self._session_lock.locked():
            async with self._session_lock:
                pass

    # -- claim sessions ------------------------------------------------------------------

    async def begin_session(self, begin: Callable[[sqlite3.Connection], R]) -> R:
        """Take the session lock and the connection, then ``begin(raw)`` (inline).

        Backs off while ``begin`` raises ``sync.Busy`` (BEGIN refused, nothing
        done) until ``busy_timeout_ms`` is spent. On return the caller holds
        the session lock (``end_session``) and the connection (``commit_session``,
        ``abort_session`` or ``release``), and ``begin`` left its transaction
        open (or ended it, if it says so in its value).
        """
        raw = self.raw
        assert raw is not None
        deadline = time.monotonic() + self._busy_timeout_ms / 1000
        attempt = 0
        self.refresh_statistics_if_due()
        waiting = False
        cause: BaseException | None = None
        try:
            while True:
                await self._session_lock.acquire()
                # Inline, like run(): nothing here waits inside SQLite.
                owned = self._owner.acquire(blocking=False)
                waiting = self._still_waiting(waiting, owned)
                if owned:
                    try:
                        return begin(raw)
                    except sync.Busy as busy:
                        cause = busy.__cause__
                        self._owner.release()
                    except BaseException:
                        self._owner.release()
                        self.end_session()
                        raise
                self.end_session()
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise self._locked_error(cause)
                await asyncio.sleep(min(backoff(attempt), remaining))
                attempt += 1
        finally:
            self._still_waiting(waiting, True)

    def end_session(self) -> None:
        """Let the next claim session (or operation of this loop) in."""
        self._session_lock.release()

    async def commit_session(self) -> None:
        """COMMIT the session's transaction and let go of the connection.

        ``sync.commit`` rolls back by itself if the COMMIT fails (and raises).
        """
        raw, thread = self.raw, self._thread
        assert raw is not None and thread is not None
        if self.offload:
            # A COMMIT that fsyncs waits on the writer thread, which lets go
            # of the connection after it even if this caller is cancelled.
            await thread.call(self._then_release, sync.commit, raw)
        else:
            try:
                sync.commit(raw)
            finally:
                self.release()

    def abort_session(self) -> None:
        """Roll the session's transaction back and let go of the connection."""
        assert self.raw is not None
        sync.rollback(self.raw)
        self.release()

    # -- the connection's owner ----------------------------------------------------------

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
            self.release()

    def release(self) -> None:
        """Let go of the connection after a write: queued writes go next."""
        self._owner.release()
        if self._group is not None:
            self._group.kick()  # writes another thread queued while we held it
        self._wrote()

    def data_version(self) -> int | None:
        """``data_version`` (unchanged by this connection's own commits); None if busy."""
        raw = self.raw
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
        self.last_version = int(row[0])
        return self.last_version

    # -- housekeeping --------------------------------------------------------------------

    def _housekeep(self, job: Callable[[], None]) -> None:
        """Run ``job`` (a checkpoint, statistics) on the housekeeping thread, FIFO."""
        housekeeper = self._housekeeper
        if housekeeper is None:
            return
        with contextlib.suppress(RuntimeError):  # shut down by close() just now
            housekeeper.submit(job)

    def refresh_statistics_if_due(self) -> None:
        """Planner statistics at most every 60 s, on the housekeeping thread (never inline).

        The slot is reserved first so concurrent claims do not all refresh.
        """
        now = time.monotonic()
        checkpointer = self._checkpointer
        if now < self._next_statistics or checkpointer is None:
            return
        self._next_statistics = now + _STATISTICS_EVERY_S
        self._housekeep(lambda: sync.refresh_statistics_waiting(checkpointer))

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
            # next write. Under NORMAL no COMMIT ever queues here: every holder
            # is inline work on a loop, brief unless a claim session is open,
            # so the RESTART waits a moment for it (giving up at once lost the
            # race to a stream of inline writes, and the WAL grew).
            try:
                if not self._owner.acquire(blocking=False) and not (
                    not self.offload
                    and not self._session_lock.locked()
                    and self._owner.acquire(timeout=_RESTART_OWNER_WAIT_S)
                ):
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
            thread = self._thread
            if frames is None or frames < WAL_RESTART_FRAMES or thread is None or self._closing:
                self._checkpoint_queued = False
                return
            thread.post(restart)

        self._housekeep(run)


def _nothing() -> None:
    """A no-op job: awaiting it on a thread waits for every job queued before it."""
