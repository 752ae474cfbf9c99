"""Storage faults in the engine's words: what a driver error means for the caller.

A full disk, an I/O error, a damaged file or a lock held too long reach callers
as ``StorageFull``, ``StorageError`` or ``StoreLocked`` (engine._errors), with
the driver's error as ``__cause__``, rather than as a raw ``sqlite3`` or
``psycopg`` exception. Everything else (a constraint a trigger enforces, a bug)
is left as the driver raised it.
"""

from __future__ import annotations

import sqlite3

import psycopg

from engine._errors import CairnQError, StorageError, StorageFull, StoreLocked

# SQLite's primary result codes (the low byte of an extended code).
_SQLITE_BUSY = 5
_SQLITE_LOCKED = 6
_SQLITE_READONLY = 8
_SQLITE_IOERR = 10
_SQLITE_CORRUPT = 11
_SQLITE_FULL = 13
_SQLITE_CANTOPEN = 14
_SQLITE_NOTADB = 26


def sqlite_fault(exc: BaseException, target: str, busy_timeout_ms: int) -> CairnQError | None:
    """The engine error a ``sqlite3`` error stands for; None if it is not a storage fault."""
    code = getattr(exc, "sqlite_errorcode", None)
    if not isinstance(exc, sqlite3.Error) or not isinstance(code, int):
        return None
    primary = code & 0xFF
    said = f"(SQLite: {exc})"
    if primary in (_SQLITE_BUSY, _SQLITE_LOCKED):
        return locked(target, busy_timeout_ms, said)
    if primary == _SQLITE_FULL:
        return StorageFull(f"{target}: the disk or the database is full {said}")
    if primary == _SQLITE_IOERR:
        return StorageError(f"{target}: the disk reported an I/O error {said}")
    if primary in (_SQLITE_CORRUPT, _SQLITE_NOTADB):
        return StorageError(f"{target}: the database file is damaged {said}")
    if primary in (_SQLITE_READONLY, _SQLITE_CANTOPEN):
        return StorageError(f"{target}: the database file cannot be written {said}")
    return None


def locked(target: str, busy_timeout_ms: int, said: str = "") -> StoreLocked:
    """A SQLite database locked by another connection for longer than the store waits."""
    tail = f" {said}" if said else ""
    return StoreLocked(
        f"database is locked: another connection held {target} longer than "
        f"busy_timeout_ms={busy_timeout_ms}{tail}"
    )


def postgres_fault(exc: BaseException, target: str) -> CairnQError | None:
    """The engine error a ``psycopg`` error stands for; None if it is not a storage fault."""
    if not isinstance(exc, psycopg.Error):
        return None
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    said = f"(Postgres: {first})"
    if isinstance(exc, psycopg.errors.DiskFull):
        return StorageFull(f"{target}: the server's disk is full {said}")
    if isinstance(exc, psycopg.errors.LockNotAvailable):
        return StoreLocked(f"{target}: a lock was held longer than lock_timeout {said}")
    if isinstance(
        exc,
        psycopg.errors.IoError | psycopg.errors.DataCorrupted | psycopg.errors.IndexCorrupted,
    ):
        return StorageError(f"{target}: the server could not read or write its data {said}")
    return None
