"""The SQLite store: cairnq protocol v1 over one database file, via ``sqlite3``.

Where the work runs (the writer connection's rules are ``_sqlite_writer``'s):

* **Inline calls give the loop a turn** (``yield_loop``): an inline operation
  ends with ``asyncio.sleep(0)`` once 0.1 ms passed since the thread's last
  one, so a task looping on store calls never starves timers, heartbeats or
  other tasks' commits.
* **The writer connection** (``_sqlite_writer``): inline on the caller's loop
  when nothing fsyncs, on the store's own writer thread (``_sqlite_thread``)
  for opening, migrating and every COMMIT that fsyncs; a busy database is
  waited out with ``asyncio.sleep`` backoff, never inside SQLite, until the
  caller's ``busy_timeout_ms`` is spent, then ``StoreLocked``.
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

Durability: WAL with ``synchronous=FULL`` by default, as the cairnq SDKs run —
the WAL is fsynced before any caller is answered, so every acknowledged write
survives a crash of the process, of the OS, or a power loss. Group commit makes
concurrent writers share that fsync. ``synchronous="normal"`` is an opt-in that
skips it: a process crash still loses nothing, an OS crash or power loss may
drop the last acknowledged commits. The WAL stays bounded: a checkpoint
restarts a WAL that passed ``_sqlite_writer.WAL_RESTART_FRAMES``.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import os
import sqlite3
import threading
import uuid
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, NoReturn, TypeVar, cast

from engine import _rules
from engine._errors import StoreClosed, StoreLocked, StoreUnavailable
from engine._models import TASK_COLUMNS
from engine._sql import migrations, statement
from engine._sqlite_file import (
    holds_nothing,
    is_read_only_file,
    read_only_uri,
    refuse_url,
    remove_database_files,
)
from engine.store import _sqlite_sync as sync
from engine.store._base import (
    StoreCapabilities,
)
from engine.store._faults import locked, sqlite_fault
from engine.store._signals import Claimer, Wake
from engine.store._sqlite_claims import SQLiteClaims
from engine.store._sqlite_commits import CommitWatch
from engine.store._sqlite_inspect_lanes import InspectLanes
from engine.store._sqlite_pragmas import check_synchronous
from engine.store._sqlite_writer import SQLiteWriter, yield_loop

T = TypeVar("T")
R = TypeVar("R")
#: ``SQLiteStore(synchronous=...)``: how durable an acknowledged commit is.
Synchronous = Literal["full", "normal"]


def _sql(name: str) -> str:
    return statement("sqlite", name)


_TASK_WIDTH = len(TASK_COLUMNS)


def _is_memory(path: str) -> bool:
    if path in ("", ":memory:"):
        return True
    return path.startswith("file:") and (path.startswith("file::memory:") or "mode=memory" in path)


class SQLiteStore(SQLiteClaims):
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
        ValueError: a bad ``busy_timeout_ms`` or ``synchronous``, or a URL such as a
            Postgres DSN as ``path`` (nothing is opened or created).
    """

    dialect = "sqlite"
    capabilities = StoreCapabilities(completing_claim=True, single_draw_commits=True)

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
        refuse_url(self._path)
        _rules.integer(busy_timeout_ms, "busy_timeout_ms", minimum=0)
        self._synchronous = check_synchronous(synchronous)
        self._memory = _is_memory(self._path)
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
        self._writer = SQLiteWriter(
            target=self._path,
            memory=self._memory,
            read_only=self._read_only,
            busy_timeout_ms=busy_timeout_ms,
            synchronous=self._synchronous,
            locked_error=self._locked_error,
        )
        self._reader: sqlite3.Connection | None = None
        # The reader is used from whichever thread calls; one user at a time.
        self._reader_lock = threading.Lock()
        self._lanes = InspectLanes(
            synchronous=self._synchronous, busy_timeout_ms=self._busy_timeout_ms
        )
        self._connect_lock: asyncio.Lock | None = None
        self._closed = False
        self._watches: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, CommitWatch] = (
            weakref.WeakKeyDictionary()
        )

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
        if self._writer.raw is not None:
            return
        if self._connect_lock is None:
            self._connect_lock = asyncio.Lock()
        async with self._connect_lock:
            if self._writer.raw is None:
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
        try:
            await self._writer.open(
                location,
                uri,
                migrate=self._migrate,
                migrations=migrations("sqlite"),
                protocol_version_sql=_sql("protocol_version"),
            )
        except sqlite3.Error as exc:
            # open_database raises a busy database as it is: locked, not broken.
            fault = sqlite_fault(exc, self._path, self._busy_timeout_ms)
            if fault is None:
                fault = StoreUnavailable(f"cannot open SQLite database {self._path}: {exc}")
            raise fault from exc
        if not self._memory:
            try:
                self._reader = sync.open_reader(location, uri=uri, synchronous=self._synchronous)
            except BaseException:
                await self._writer.close()
                raise
            self._lanes.at = (location, uri)

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
        await self._writer.drain()
        self.signals.release_all()
        if self._reader is not None:
            with self._reader_lock:
                self._reader.close()
            self._reader = None
        await self._lanes.close()
        await self._writer.close()
        for watch in watches:
            await watch.released()

    # -- plumbing --------------------------------------------------------------------

    async def _ready(self) -> sqlite3.Connection:
        """The writer connection, connecting first if needed."""
        if self._closed:
            raise StoreClosed(f"store {self._path} is closed")
        if self._writer.raw is None:
            await self.connect()
        assert self._writer.raw is not None
        return self._writer.raw

    def _check_writable(self, what: str) -> None:
        if self._read_only:
            raise StoreUnavailable(f"store {self._path} is open read-only; {what} writes")

    _last_busy: BaseException | None = None

    def _locked_error(self, cause: BaseException | None = None) -> StoreLocked:
        """``StoreLocked`` for a write whose busy budget ran out (``cause``: SQLite's error).

        A caller that only ever found the writer connection in use in this
        process meanwhile has no error of its own: it takes the last one seen.
        """
        if cause is not None:
            self._last_busy = cause
        error = locked(self._path, self._busy_timeout_ms)
        error.__cause__ = cause if cause is not None else self._last_busy
        return error

    @contextlib.contextmanager
    def _faults(self) -> Iterator[None]:
        """Storage faults raised inside as engine errors (``_faults.sqlite_fault``)."""
        try:
            yield
        except sqlite3.Error as exc:
            self._raise_fault(exc)

    def _raise_fault(self, exc: sqlite3.Error) -> NoReturn:
        """Raise ``exc`` as its engine error (``_faults.sqlite_fault``), or as it is."""
        fault = sqlite_fault(exc, self._path, self._busy_timeout_ms)
        if fault is None:
            raise exc
        raise fault from exc

    async def _retrying(self, fn: Callable[..., R], *args: Any, commits: bool = True) -> R:
        """Run ``fn(raw, *args)`` on the writer connection (``SQLiteWriter.run``).

        Raises ``StoreLocked`` once the busy budget is spent, and storage faults
        as engine errors.
        """
        await self._ready()
        with self._faults():
            return await self._writer.run(fn, *args, commits=commits)

    async def _fetch(self, sql: str, params: dict[str, Any]) -> sync.Rows:
        """A read: inline on the reader when it can answer at once, else on the writer."""
        if self._closed or self._writer.raw is None:
            await self._ready()
        reader = self._reader
        if reader is not None and self._reader_lock.acquire(blocking=False):
            # The hot path of every read: no context manager, no writer hop.
            rows: sync.Rows | None = None
            try:
                rows = reader.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                if not sync.is_busy(exc):
                    self._raise_fault(exc)
            finally:
                self._reader_lock.release()
            if rows is not None:
                await yield_loop()
                return rows
        return await self._retrying(sync.fetch, sql, params, commits=False)

    async def _write(self, sql: str, params: dict[str, Any]) -> tuple[int, sync.Rows]:
        """A single-statement write through group commit; ``(now_ms, rows)`` after COMMIT."""
        if self._writer.raw is None or self._closed:
            await self._ready()
        try:  # _faults() inline: this is every single-statement write's path
            return await self._writer.write(sql, params)
        except sqlite3.Error as exc:
            self._raise_fault(exc)

    # -- reads -----------------------------------------------------------------------

    async def protocol_version(self) -> int:
        """The database's ``protocol_version`` (0 when the row is missing)."""
        rows = await self._fetch(_sql("protocol_version"), {})
        return int(rows[0][0]) if rows else 0

    async def read_statement(
        self, name: str, params: Mapping[str, Any], *, background: bool = False
    ) -> builtins.list[dict[str, Any]]:
        """Run the read-only statement ``sql/sqlite/<name>.sql``; rows as dicts.

        Raises:
            ValueError: unknown name, or the statement is not a read.
        """
        sql = self._read_statement_text(name)  # run as written: each file seeks as it is
        bound = dict(params)
        if self._closed or self._writer.raw is None:
            await self._ready()
        if self._lanes.at is not None:
            with self._faults():
                return await self._lanes.read(sql, bound, background=background)
        names, rows = await self._retrying(sync.fetch_described, sql, bound, commits=False)
        return [dict(zip(names, row, strict=True)) for row in rows]

    # -- wakeups ----------------------------------------------------------------------------

    def arm_claim_wake(self, queues: Sequence[str], claimer: Claimer | None = None) -> Wake:
        """A wake for a task that may be claimable on ``queues`` (see the base class).

        Fired by a submit in this process, or by another process's commit
        (``_sqlite_commits``: a file-change notification, else a ~15 ms poll).
        """
        return self._with_commits(self.signals.arm_claim(queues, claimer))

    def arm_task_done_wake(self, task_id: str) -> Wake:
        """A wake for ``task_id`` going terminal; fired as ``arm_claim_wake``'s is."""
        return self._with_commits(self.signals.arm_done(task_id))

    def _with_commits(self, wake: Wake) -> Wake:
        """Add another connection's next commit to what fires ``wake``."""
        if self._memory or self._closed or self._writer.raw is None:
            return wake  # an in-memory database has no other connection
        watch = self._watches.get(wake.loop)
        if watch is None:
            # A URI's file is not a plain path: watch it by polling.
            path = None if self._uri else os.path.realpath(self._path)
            watch = self._watches[wake.loop] = CommitWatch(
                self._writer.data_version, path, self._writer.last_version
            )
        watch.add(wake)
        return wake

    # -- claims --------------------------------------------------------------------------

    def _refresh_statistics_if_due(self) -> None:
        self._writer.refresh_statistics_if_due()


__all__ = ["SQLiteStore"]
