"""The history file: counts sampled over time, failures seen, the audit trail.

Plain ``sqlite3`` on a file of the console's own (never the cairnq database,
which other SDKs share). Created 0600 in a 0700 folder; bounded by age (rows
older than ``max_age_ms`` are deleted) and by size (the oldest samples, then
failures, go until the file is under 90% of ``max_bytes``, so it stays under
the bound until the next prune). One connection, guarded by a lock, usable from
the thread the recorder writes on.

Durability: the file is in WAL mode with ``synchronous = NORMAL``: a sample
commits without an fsync, so an OS crash or power loss may lose the last
seconds of history (never anything of the cairnq database, which this file is
not). The audit trail is the exception: each audit entry commits with
``synchronous = FULL`` (an fsync of the log), so a write the console reported
is on disk before the console goes on.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cairnq_tui.history._samples import (
    SAMPLES_SCHEMA,
    SampleChain,
    forget,
    load_keys,
    read_depth,
    write_sample,
)

DEFAULT_MAX_AGE_MS = 7 * 86_400_000
DEFAULT_MAX_BYTES = 50 * 1024 * 1024

#: The layout of the file (``meta`` row ``format``). Format 1 (a row per count)
#: is converted by dropping its samples.
FORMAT = "2"

_SCHEMA = """
create table if not exists meta (key text primary key, value text not null);
create table if not exists failures (
    task_id text not null, attempt integer not null, name text not null,
    queue text not null, status text not null, error_type text, message text,
    at_ms integer not null, seen_at_ms integer not null,
    primary key (task_id, attempt)
);
create index if not exists failures_at on failures (at_ms);
create table if not exists audit (
    at_ms integer not null, os_user text not null, target text not null,
    action text not null, detail text not null, count integer not null
);
create index if not exists audit_at on audit (at_ms);
create table if not exists workers (
    worker_id text primary key, first_seen_ms integer not null,
    at_ms integer not null, tasks integer not null, names text not null,
    queues text not null
);
"""


@dataclass(frozen=True, slots=True)
class SeenFailure:
    """A failed attempt the recorder saw (a failed task, or one retrying after it)."""

    task_id: str
    attempt: int
    name: str
    queue: str
    status: str
    error_type: str | None
    message: str | None
    at_ms: int


@dataclass(frozen=True, slots=True)
class SeenWorker:
    """A worker id the recorder saw holding leases: when first and last, and what
    it held the last time (tasks, names, queues)."""

    worker_id: str
    first_seen_ms: int
    last_seen_ms: int
    tasks: int
    names: tuple[str, ...]
    queues: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """A write the console made."""

    at_ms: int
    os_user: str
    target: str
    action: str
    detail: str
    count: int


def _create_private(path: Path) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    os.close(fd)
    os.chmod(path, 0o600)  # (an existing file made by hand keeps no wider mode)


class HistoryFile:
    """One target's history file."""

    def __init__(
        self,
        path: Path,
        *,
        target: str,
        max_age_ms: int = DEFAULT_MAX_AGE_MS,
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        if max_age_ms < 1 or max_bytes < 64 * 1024:
            raise ValueError("max_age_ms must be >= 1 and max_bytes >= 64 KiB")
        self.path = path
        self.target = target
        self.max_age_ms = max_age_ms
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._chain = SampleChain()
        _create_private(path)
        self._conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        try:
            with self._lock:
                self._open()
        except BaseException:
            self._conn.close()
            raise
        for suffix in ("-wal", "-shm", "-journal"):  # sqlite makes these with the umask
            side = Path(f"{path}{suffix}")
            if side.exists():
                os.chmod(side, 0o600)

    def _open(self) -> None:
        conn = self._conn
        fresh = not conn.execute("select 1 from sqlite_master limit 1").fetchone()
        if fresh:  # (only before the first table: pages freed by prunes go back)
            conn.execute("pragma auto_vacuum = incremental")
        conn.execute("pragma journal_mode = wal")
        conn.execute("pragma synchronous = normal")
        conn.executescript(_SCHEMA)
        found = conn.execute("select value from meta where key = 'format'").fetchone()
        if found is None or found[0] != FORMAT:
            conn.execute("drop table if exists samples")  # format 1: a row per count
            conn.executescript(SAMPLES_SCHEMA)
            conn.execute("insert or replace into meta values ('format', ?)", (FORMAT,))
            if not fresh:
                conn.execute("pragma auto_vacuum = incremental")
                conn.execute("vacuum")
        conn.execute("insert or replace into meta values ('target', ?)", (self.target,))
        self._chain.keys = load_keys(conn)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    # -- writes ---------------------------------------------------------------------------

    def record_sample(
        self,
        at_ms: int,
        counts: Mapping[tuple[str, str | None, str], int],
        failures: Iterable[SeenFailure] = (),
        workers: Iterable[tuple[str, int, Sequence[str], Sequence[str]]] = (),
    ) -> int:
        """One sample in one transaction: the counts per ``(queue, name, status)``
        (name None: "other"), the failures seen and the workers holding leases.
        Returns how many failures were new."""
        with self._lock:
            self._conn.execute("begin")
            try:
                write_sample(self._conn, self._chain, at_ms, counts)
                self._write_workers(at_ms, workers)
                new = self._write_failures(at_ms, failures)
                self._conn.execute("commit")
            except BaseException:
                self._conn.execute("rollback")
                forget(self._chain)
                raise
        return new

    def record_counts(self, at_ms: int, counts: Iterable[tuple[str, str | None, str, int]]) -> None:
        """A sample of counts alone: ``(queue, name, status, count)`` rows."""
        self.record_sample(at_ms, {(q, n, s): c for q, n, s, c in counts})

    def record_failures(self, seen_at_ms: int, failures: Iterable[SeenFailure]) -> int:
        """Failures seen; an attempt already recorded is kept as first seen. Returns
        how many were new."""
        with self._lock:
            self._conn.execute("begin")
            new = self._write_failures(seen_at_ms, failures)
            self._conn.execute("commit")
            return new

    def _write_failures(self, seen_at_ms: int, failures: Iterable[SeenFailure]) -> int:
        rows = [
            (
                f.task_id,
                f.attempt,
                f.name,
                f.queue,
                f.status,
                f.error_type,
                f.message,
                f.at_ms,
                seen_at_ms,
            )
            for f in failures
        ]
        before = self._conn.total_changes
        self._conn.executemany(
            "insert or ignore into failures values (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows
        )
        return self._conn.total_changes - before

    def record_workers(
        self, at_ms: int, workers: Iterable[tuple[str, int, Sequence[str], Sequence[str]]]
    ) -> None:
        """Workers holding leases now: ``(worker_id, tasks, names, queues)``."""
        with self._lock:
            self._conn.execute("begin")
            self._write_workers(at_ms, workers)
            self._conn.execute("commit")

    def _write_workers(
        self, at_ms: int, workers: Iterable[tuple[str, int, Sequence[str], Sequence[str]]]
    ) -> None:
        rows = [
            (w, at_ms, at_ms, n, "\x1f".join(names), "\x1f".join(queues))
            for w, n, names, queues in workers
        ]
        self._conn.executemany(
            "insert into workers values (?, ?, ?, ?, ?, ?) on conflict (worker_id) do "
            "update set at_ms = excluded.at_ms, tasks = excluded.tasks, "
            "names = excluded.names, queues = excluded.queues",
            rows,
        )

    def workers_seen(self, *, limit: int = 500) -> list[SeenWorker]:
        """Workers seen, the most recently seen first."""
        with self._lock:
            rows = self._conn.execute(
                "select worker_id, first_seen_ms, at_ms, tasks, names, queues from workers "
                "order by at_ms desc, worker_id limit ?",
                (limit,),
            ).fetchall()
        return [
            SeenWorker(
                w,
                int(f),
                int(a),
                int(n),
                tuple(filter(None, names.split("\x1f"))),
                tuple(filter(None, queues.split("\x1f"))),
            )
            for w, f, a, n, names, queues in rows
        ]

    def audit(self, entry: AuditEntry) -> None:
        """Append an audit entry, durably: this commit syncs the log (``FULL``)."""
        with self._lock:
            self._conn.execute("pragma synchronous = full")
            try:
                self._conn.execute(
                    "insert into audit values (?, ?, ?, ?, ?, ?)",
                    (
                        entry.at_ms,
                        entry.os_user,
                        entry.target,
                        entry.action,
                        entry.detail,
                        entry.count,
                    ),
                )
            finally:
                self._conn.execute("pragma synchronous = normal")

    def prune(self, now_ms: int) -> int:
        """Drop rows older than the age bound, then the oldest samples (whole
        keyframe spans) and failures until the file is under 90% of the size
        bound; give the freed pages back. Returns the rows deleted."""
        cutoff = now_ms - self.max_age_ms
        deleted = 0
        with self._lock:
            conn = self._conn
            for table in ("samples", "failures", "audit", "workers"):
                deleted += conn.execute(f"delete from {table} where at_ms < ?", (cutoff,)).rowcount
            deleted += self._drop_orphans()
            while self._size() > self.max_bytes * 9 // 10:
                span = conn.execute("select min(at_ms), max(at_ms) from samples").fetchone()
                cur = None
                if span[0] is not None and span[0] < span[1]:
                    middle = span[0] + max(1, (span[1] - span[0]) // 10)
                    cur = conn.execute("delete from samples where at_ms < ?", (middle,))
                    deleted += cur.rowcount + self._drop_orphans()
                if cur is None or cur.rowcount == 0:
                    cur = conn.execute(
                        "delete from failures where rowid in "
                        "(select rowid from failures order by at_ms limit 1000)"
                    )
                    deleted += cur.rowcount
                    if cur.rowcount == 0:
                        break
                conn.execute("pragma incremental_vacuum")
            if deleted:
                forget(self._chain)
                conn.execute("pragma incremental_vacuum")
                conn.execute("pragma wal_checkpoint(truncate)")
        return deleted

    def _drop_orphans(self) -> int:
        """Change rows before the oldest keyframe (nothing to replay them from)."""
        return self._conn.execute(
            "delete from samples where seq < coalesce("
            "(select seq from samples where full = 1 order by seq limit 1), "
            "(select max(seq) + 1 from samples))"
        ).rowcount

    def _size(self) -> int:
        """Bytes the file's live pages take (the WAL's pages counted, free ones not)."""
        pages = self._conn.execute("pragma page_count").fetchone()[0]
        free = self._conn.execute("pragma freelist_count").fetchone()[0]
        size = self._conn.execute("pragma page_size").fetchone()[0]
        return (int(pages) - int(free)) * int(size)

    def size_bytes(self) -> int:
        with self._lock:
            return self._size()

    # -- reads --------------------------------------------------------------------------------

    def depth(
        self,
        since_ms: int,
        *,
        statuses: Sequence[str] = ("queued",),
        queue: str | None = None,
        name: str | None = None,
    ) -> dict[str, list[tuple[int, int]]]:
        """Per queue: ``(at_ms, count)`` of the given statuses summed, oldest first,
        of one queue and of one name if given (a name past the ones sampled by
        name is not found: its counts went to "other")."""
        with self._lock:
            return read_depth(self._conn, since_ms, statuses, queue, name)

    def attempts(self, task_id: str) -> list[SeenFailure]:
        """The failed attempts of a task the recorder saw, oldest first."""
        with self._lock:
            rows = self._conn.execute(
                "select task_id, attempt, name, queue, status, error_type, message, at_ms "
                "from failures where task_id = ? order by attempt",
                (task_id,),
            ).fetchall()
        return [SeenFailure(*row) for row in rows]

    def audit_entries(self, *, limit: int = 500) -> list[AuditEntry]:
        """The newest audit entries first."""
        with self._lock:
            rows = self._conn.execute(
                "select at_ms, os_user, target, action, detail, count from audit "
                "order by at_ms desc, rowid desc limit ?",
                (limit,),
            ).fetchall()
        return [AuditEntry(*row) for row in rows]

    def counts(self) -> dict[str, int]:
        """Rows per table (for tests and the status of the file)."""
        with self._lock:
            return {
                t: int(self._conn.execute(f"select count(*) from {t}").fetchone()[0])
                for t in ("samples", "failures", "audit")
            }
