"""The SQLite store: cairnq protocol v1 over one database file, via ``sqlite3``.

Where the work runs (the writer connection's rules are ``_sqlite_writer``'s):

* **Every call gives the loop a turn** (``yield_loop``): an inline operation
  ends with ``asyncio.sleep(0)``, so a task looping on store calls never
  starves timers, heartbeats or other tasks' commits.
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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal, TypeVar, cast

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


def _task(row: Sequence[Any]) -> Task:
    """A ``Task`` from a ``select *`` row (columns in the §1.5 order).

    Columns an operator added after the protocol's (allowed: the open-time schema
    check makes sure the protocol's come first, in order) are left out.
    """
    return task_from_values(row[:_TASK_WIDTH])


def _first_task(rows: sync.Rows) -> Task | None:
    return _task(rows[0]) if rows else None


def purge_statement(active: frozenset[str]) -> str:
    """The purge variant for the filters given a value, read in completion order.

    With a queue, ``purge`` (its literal status list matches the partial
    ``(queue, completed_at_ms)`` index); without, ``purge_by_age``, which hides
    the indexes that made the planner sort every candidate (its header says how).
    """
    return specialise(_sql("purge" if "queue" in active else "purge_by_age"), active)


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
        # Introspection reads (read_statement) scan pages of thousands of rows: they
        # run on a thread of their own with a connection of their own, so a console
        # sharing this loop never freezes for them, and writers never wait on them.
        self._inspect_thread: ThreadPoolExecutor | None = None
        self._inspect_reader: sqlite3.Connection | None = None
        self._reader_at: tuple[str, bool] | None = None
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
            self._reader_at = (location, uri)

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
        if self._inspect_thread is not None:
            await asyncio.get_running_loop().run_in_executor(
                self._inspect_thread, self._close_inspect_reader
            )
            self._inspect_thread.shutdown(wait=False)
            self._inspect_thread = None
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

    def _locked_error(self, cause: BaseException | None = None) -> StoreLocked:
        """``StoreLocked`` for a write whose busy budget ran out (``cause``: SQLite's error)."""
        error = locked(self._path, self._busy_timeout_ms)
        error.__cause__ = cause
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
                await yield_loop()
                return rows
        return await self._retrying(sync.fetch, sql, params, commits=False)

    async def _write(self, sql: str, params: dict[str, Any]) -> tuple[int, sync.Rows]:
        """A single-statement write through group commit; ``(now_ms, rows)`` after COMMIT."""
        if self._writer.raw is None or self._closed:
            await self._ready()
        with self._faults():
            return await self._writer.write(sql, params)

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
        if self._closed or self._writer.raw is None:
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
        self._writer.refresh_statistics_if_due()
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
        await self._ready()
        with self._writer.in_flight():
            return await self._run_session(queues, worker_id, lease_ms, plan)

    async def _run_session(
        self,
        queues: builtins.list[str],
        worker_id: str,
        lease_ms: int,
        plan: Plan[T],
    ) -> tuple[T, builtins.list[Task]]:
        recover = _sql("recover_leases")
        recover_params = {"lease_expired_error": LEASE_EXPIRED_JSON}
        with self._faults():
            recovered = await self._writer.begin_session(
                lambda raw: sync.begin_with(raw, recover, recover_params)
            )
        try:
            with self._faults():
                value = await self._plan_and_commit(queues, worker_id, lease_ms, plan)
        finally:
            self._writer.end_session()
        await yield_loop()
        return value, [_task(row) for row in recovered]

    async def _plan_and_commit(
        self,
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
        raw = self._writer.raw
        assert raw is not None

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
            self._writer.abort_session()
            raise
        await self._writer.commit_session()
        return value

    async def _completing_claim(
        self, ids: builtins.list[str], args: ClaimArgs, plan: Plan[T], single_draw: bool
    ) -> CompletingClaim[T] | Exception:
        """One ``BEGIN IMMEDIATE``: complete, recover, ``plan``, COMMIT (see the base class).

        ``single_draw`` saves a round trip on Postgres; SQLite has none to save.
        Raises ``StoreLocked`` if the database stayed locked for ``busy_timeout_ms``.
        """
        del single_draw
        await self._ready()
        settle = (_sql("complete_many"), {"ids": _json.dumps(ids), "worker_id": args.worker_id})
        recover = (_sql("recover_leases"), {"lease_expired_error": LEASE_EXPIRED_JSON})
        with self._writer.in_flight():
            with self._faults():
                started = await self._writer.begin_session(
                    lambda raw: sync.begin_settling(raw, settle, recover)
                )
            value: T | None = None
            try:
                if isinstance(started, Exception):
                    # The statements were rolled back with their transaction.
                    self._writer.release()
                    return started
                try:
                    with self._faults():
                        value = await self._plan_and_commit(
                            args.queues, args.worker_id, args.lease_ms, plan
                        )
                except Exception as exc:
                    return exc
            finally:
                self._writer.end_session()
        settled_rows, recovered = started
        await yield_loop()
        return CompletingClaim(
            {row[0] for row in settled_rows}, value, None, [_task(r) for r in recovered]
        )

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
