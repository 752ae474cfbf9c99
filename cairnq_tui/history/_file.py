"""The history file: counts sampled over time, failures seen, the audit trail.

Plain ``sqlite3`` on a file of the console's own (never the cairnq database,
which other SDKs share). Created 0600 in a 0700 folder; bounded by age (rows
older than ``max_age_ms`` are deleted) and by size (the oldest samples and
failures go until the file is under ``max_bytes``). One connection, guarded by a
lock, usable from the thread the recorder writes on.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

DEFAULT_MAX_AGE_MS = 7 * 86_400_000
DEFAULT_MAX_BYTES = 50 * 1024 * 1024

_SCHEMA = """
create table if not exists meta (key text primary key, value text not null);
create table if not exists samples (
    at_ms integer not null, queue text not null, name text not null,
    status text not null, count integer not null
);
create index if not exists samples_at on samples (at_ms);
create index if not exists samples_queue_at on samples (queue, at_ms);
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
        _create_private(path)
        self._conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        for suffix in ("-wal", "-shm", "-journal"):  # sqlite makes these with the umask
            side = Path(f"{path}{suffix}")
            if side.exists():
                os.chmod(side, 0o600)
        with self._lock:
            self._conn.execute("pragma journal_mode = delete")
            self._conn.executescript(_SCHEMA)
            self._conn.execute("insert or replace into meta values ('target', ?)", (target,))

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    # -- writes ---------------------------------------------------------------------------

    def record_counts(self, at_ms: int, counts: Iterable[tuple[str, str, str, int]]) -> None:
        """One sample: ``(queue, name, status, count)`` rows taken at ``at_ms``."""
        rows = [(at_ms, q, n, s, c) for q, n, s, c in counts]
        with self._lock:
            self._conn.execute("begin")
            self._conn.executemany("insert into samples values (?, ?, ?, ?, ?)", rows)
            self._conn.execute("commit")

    def record_failures(self, seen_at_ms: int, failures: Iterable[SeenFailure]) -> int:
        """Failures seen; an attempt already recorded is kept as first seen. Returns
        how many were new."""
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
        with self._lock:
            before = self._conn.total_changes
            self._conn.execute("begin")
            self._conn.executemany(
                "insert or ignore into failures values (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows
            )
            self._conn.execute("commit")
            return self._conn.total_changes - before

    def record_workers(
        self, at_ms: int, workers: Iterable[tuple[str, int, Sequence[str], Sequence[str]]]
    ) -> None:
        """Workers holding leases now: ``(worker_id, tasks, names, queues)``."""
        rows = [
            (w, at_ms, at_ms, n, "\x1f".join(names), "\x1f".join(queues))
            for w, n, names, queues in workers
        ]
        with self._lock:
            self._conn.execute("begin")
            self._conn.executemany(
                "insert into workers values (?, ?, ?, ?, ?, ?) on conflict (worker_id) do "
                "update set at_ms = excluded.at_ms, tasks = excluded.tasks, "
                "names = excluded.names, queues = excluded.queues",
                rows,
            )
            self._conn.execute("commit")

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
        with self._lock:
            self._conn.execute(
                "insert into audit values (?, ?, ?, ?, ?, ?)",
                (entry.at_ms, entry.os_user, entry.target, entry.action, entry.detail, entry.count),
            )

    def prune(self, now_ms: int) -> int:
        """Drop rows older than the age bound, then the oldest samples and failures
        until the file fits the size bound. Returns the rows deleted."""
        cutoff = now_ms - self.max_age_ms
        deleted = 0
        with self._lock:
            for table in ("samples", "failures", "audit", "workers"):
                cur = self._conn.execute(f"delete from {table} where at_ms < ?", (cutoff,))
                deleted += cur.rowcount
            while self._size() > self.max_bytes:
                oldest = self._conn.execute("select min(at_ms), max(at_ms) from samples").fetchone()
                if oldest[0] is None or oldest[0] == oldest[1]:
                    cur = self._conn.execute(
                        "delete from failures where rowid in "
                        "(select rowid from failures order by at_ms limit 1000)"
                    )
                    deleted += cur.rowcount
                    if cur.rowcount == 0:
                        break
                else:
                    middle = oldest[0] + max(1, (oldest[1] - oldest[0]) // 10)
                    cur = self._conn.execute("delete from samples where at_ms < ?", (middle,))
                    deleted += cur.rowcount
                self._conn.execute("vacuum")
            if deleted:
                self._conn.execute("vacuum")
        return deleted

    def _size(self) -> int:
        pages = self._conn.execute("pragma page_count").fetchone()[0]
        size = self._conn.execute("pragma page_size").fetchone()[0]
        return int(pages) * int(size)

    def size_bytes(self) -> int:
        with self._lock:
            return self._size()

    # -- reads --------------------------------------------------------------------------------

    def depth(
        self, since_ms: int, *, statuses: Sequence[str] = ("queued",)
    ) -> dict[str, list[tuple[int, int]]]:
        """Per queue: ``(at_ms, count)`` of the given statuses summed, oldest first."""
        marks = ", ".join("?" for _ in statuses)
        with self._lock:
            rows = self._conn.execute(
                f"select queue, at_ms, sum(count) from samples where at_ms >= ? "
                f"and status in ({marks}) group by queue, at_ms order by queue, at_ms",
                (since_ms, *statuses),
            ).fetchall()
        out: dict[str, list[tuple[int, int]]] = {}
        for queue, at_ms, count in rows:
            out.setdefault(queue, []).append((int(at_ms), int(count)))
        return out

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
