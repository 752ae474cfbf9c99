"""What the SQLite store's connections are set to: durability, the WAL's cap, waits.

A pragma's value cannot be a bound parameter, so every pragma the engine sets
is written out whole here, one statement per value, never formatted from a
value. A wait the caller chooses (``busy_timeout_ms``) reaches SQLite through
``sqlite3.connect(timeout=...)`` instead (``connect_timeout``).
"""

from __future__ import annotations

import sqlite3

#: Accepted values of ``SQLiteStore(synchronous=...)``; the first is the default.
SYNCHRONOUS_MODES = ("full", "normal")
#: A reset WAL is truncated to this size (``journal_size_limit``).
WAL_SIZE_LIMIT_BYTES = 8 * 1024 * 1024
#: How long a RESTART checkpoint waits for the write lock and for readers.
_RESTART_WAIT_MS = 250

_SET_SYNCHRONOUS = {
    "full": "pragma synchronous = full",
    "normal": "pragma synchronous = normal",
}
_SET_WAL_SIZE_LIMIT = "pragma journal_size_limit = 8388608"  # WAL_SIZE_LIMIT_BYTES
WAIT_FOR_RESTART = "pragma busy_timeout = 250"  # _RESTART_WAIT_MS
NEVER_WAIT = "pragma busy_timeout = 0"
#: SQLite keeps its busy timeout in a C int of milliseconds.
_MAX_WAIT_MS = 2**31 - 1


def connect_timeout(busy_timeout_ms: int) -> float:
    """``sqlite3.connect``'s ``timeout`` (seconds) giving a busy timeout of exactly
    ``busy_timeout_ms`` (the driver truncates ``timeout * 1000``), at most ~24.8 days."""
    return (min(busy_timeout_ms, _MAX_WAIT_MS) + 0.5) / 1000


def check_synchronous(synchronous: object) -> str:
    """The ``synchronous`` setting, lower-cased; ``ValueError`` unless full or normal."""
    if not isinstance(synchronous, str) or synchronous.lower() not in SYNCHRONOUS_MODES:
        raise ValueError(f"synchronous must be 'full' or 'normal', got {synchronous!r}")
    return synchronous.lower()


def set_durability(conn: sqlite3.Connection, synchronous: str) -> None:
    """``synchronous`` and the WAL size cap, on a connection that commits or checkpoints.

    FULL (the default, what the cairnq SDKs run) fsyncs the WAL at every COMMIT:
    an acknowledged write survives an OS crash or power loss. NORMAL skips that
    fsync: a process crash still loses nothing, an OS crash may lose the last
    acknowledged commits. ``journal_size_limit`` cuts a WAL that a checkpoint
    reset back to ``WAL_SIZE_LIMIT_BYTES`` (SQLite keeps the largest size seen).
    """
    conn.execute(_SET_SYNCHRONOUS[check_synchronous(synchronous)])
    conn.execute(_SET_WAL_SIZE_LIMIT)
