"""What a SQLite path holds, looked at read-only before anything opens it as a store."""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from engine._redaction import redact_dsn

#: ``scheme://`` at the start of a path: a URL, never a file anyone means to create.
_URL_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def refuse_url(path: str) -> None:
    """Raise ``ValueError`` when ``path`` is a URL (a Postgres DSN, say).

    Opened as a SQLite path it would silently become directories named after the
    URL with a new database inside.
    """
    if not _URL_SCHEME.match(path):
        return
    hint = (
        " (a Postgres DSN: use PostgresStore or CairnQ.postgres)"
        if path.lower().startswith(("postgres://", "postgresql://"))
        else ""
    )
    raise ValueError(
        f"SQLiteStore takes a file path, ':memory:' or a 'file:' URI, not the URL "
        f"{redact_dsn(path)}{hint}"
    )


@dataclass(frozen=True, slots=True)
class SQLiteFileKind:
    """What a path holds, checked read-only before a store opens (and migrates) it.

    ``kind``: ``"missing"``, ``"empty"`` (a zero-byte file), ``"cairnq"`` (has
    ``cairnq_tasks``), ``"foreign"`` (a SQLite database without it; ``tables``
    lists what it holds), ``"locked"`` (another connection holds it, e.g. a
    rollback-journal database in an exclusive transaction: what it is cannot be
    read now; opening a store on it raises ``StoreLocked``) or ``"not-sqlite"``
    (``detail`` says why).
    """

    kind: Literal["missing", "empty", "cairnq", "foreign", "locked", "not-sqlite"]
    tables: tuple[str, ...] = ()
    detail: str = ""


#: How long ``describe_sqlite_file`` waits for another connection's lock.
_DESCRIBE_WAIT_S = 1.0
_SQLITE_BUSY, _SQLITE_LOCKED = 5, 6


def read_only_uri(path: Path) -> str:
    """The URI that opens ``path`` read-only, creating nothing beside it.

    A WAL database read through ``mode=ro`` still needs its ``-shm`` (and
    ``-wal``) files, which SQLite creates when missing; in a folder that cannot
    take them the open fails ("attempt to write a readonly database"). When no
    ``-wal`` holds anything (the last writer closed cleanly), the database file
    is the whole database, and ``immutable=1`` reads it without those files.
    """
    uri = path.resolve().as_uri() + "?mode=ro"
    folder = path.resolve().parent
    wal = Path(f"{path}-wal")
    if not os.access(folder, os.W_OK) and (not wal.exists() or wal.stat().st_size == 0):
        uri += "&immutable=1"
    return uri


def is_read_only_file(path: Path) -> bool:
    """True for an existing file this process cannot (or its mode says not to) write.

    Root may write any file; a file without any write bit was still made
    read-only on purpose, and a store never writes it.
    """
    return path.exists() and (not os.access(path, os.W_OK) or not path.stat().st_mode & 0o222)


def remove_database_files(path: str) -> None:
    """Remove ``path`` and its ``-wal``/``-shm``/``-journal`` (those that exist).

    Only for a file the caller itself created and failed to make a database of.
    """
    for suffix in ("", "-wal", "-shm", "-journal"):
        with contextlib.suppress(OSError):
            os.remove(path + suffix)


def holds_nothing(path: str) -> bool:
    """True when the file at ``path`` is empty, or a SQLite file holding no table and
    nothing committed to its WAL: at most its first page (any table needs a
    second, for its root), and a missing or empty ``-wal``. Read from the bytes,
    opening no connection (one may fail where this is asked: on a full disk).
    """
    try:
        size = os.path.getsize(path)
        if size == 0:
            return True
        with open(path, "rb") as file:
            header = file.read(100)
        if len(header) < 100 or not header.startswith(b"SQLite format 3\0"):
            return False
        page_size = int.from_bytes(header[16:18], "big")
        page_size = 65536 if page_size == 1 else page_size
        wal = Path(f"{path}-wal")
        return size <= page_size and (not wal.exists() or wal.stat().st_size == 0)
    except OSError:
        return False


def describe_sqlite_file(path: str) -> SQLiteFileKind:
    """Look at ``path`` without writing to it (not even the journal mode).

    A store opened with migrations on would create the cairnq tables in any
    SQLite file; a console pointed at the wrong file must refuse instead.
    """
    file = Path(path)
    if not file.exists():
        return SQLiteFileKind("missing")
    if file.is_dir():
        return SQLiteFileKind("not-sqlite", detail="it is a directory")
    if file.stat().st_size == 0:
        return SQLiteFileKind("empty")
    if not os.access(file, os.R_OK):
        return SQLiteFileKind("not-sqlite", detail="permission denied")
    try:
        conn = sqlite3.connect(read_only_uri(file), uri=True, timeout=_DESCRIBE_WAIT_S)
        try:
            rows = conn.execute(
                "select name from sqlite_master where type = 'table' order by name"
            ).fetchall()
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        if exc.sqlite_errorcode & 0xFF in (_SQLITE_BUSY, _SQLITE_LOCKED):
            return SQLiteFileKind("locked", detail=str(exc))
        return SQLiteFileKind("not-sqlite", detail=str(exc))
    tables = tuple(str(r[0]) for r in rows)
    return SQLiteFileKind("cairnq" if "cairnq_tasks" in tables else "foreign", tables)
