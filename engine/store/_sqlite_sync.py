"""The SQLite store's synchronous half: whole operations run on one connection thread.

Every function here takes a stdlib ``sqlite3.Connection`` (opened in autocommit
mode) and does one complete unit of work — a statement, a group-commit batch, a
transaction, the open sequence — so the async side pays one thread round trip
per unit instead of one per statement (docs/engine.md, "Stores"). Nothing here touches the
event loop. A function either finishes with no transaction open or, for the
multi-step claim session only, leaves exactly the one its caller will end.

A function that meets SQLITE_BUSY where retrying is safe (a bare statement or a
``BEGIN IMMEDIATE`` — never a transaction body) raises ``Busy``, so the async
side can back off without holding the thread.
"""

from __future__ import annotations

import contextlib
import operator
import sqlite3
import time
from collections.abc import Sequence
from typing import Any

import orjson

from engine._clock import now_ms
from engine._errors import ProtocolVersionMismatch, StoreUnavailable
from engine._sql import statement
from engine.store._schema_check import check_sqlite
from engine.store._sqlite_pragmas import (
    NEVER_WAIT,
    WAIT_FOR_RESTART,
    connect_timeout,
    set_durability,
)


class Busy(Exception):
    """Another connection holds the lock and nothing was done: safe to retry."""


_SQLITE_BUSY = 5
Rows = list[tuple[Any, ...]]


def is_busy(exc: BaseException) -> bool:
    """SQLITE_BUSY (any extended code); SQLITE_LOCKED is a real error, not retried."""
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF == _SQLITE_BUSY
    return isinstance(exc, sqlite3.OperationalError) and "database is locked" in str(exc)


def stamp(params: dict[str, Any], now: int) -> None:
    """Bind the clock: ``now_ms`` and the absolute times derived from relative inputs."""
    params["now_ms"] = now
    if "lease_ms" in params:
        params["lease_until_ms"] = now + params["lease_ms"]
    if "older_than_ms" in params:
        params["before_ms"] = now - params["older_than_ms"]


def _rollback_quietly(conn: sqlite3.Connection) -> None:
    # After any failure the shared connection must not stay in a transaction.
    if conn.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("rollback")


def fetch(conn: sqlite3.Connection, sql: str, params: dict[str, Any]) -> Rows:
    """Run one read statement; ``Busy`` if the database could not be read yet."""
    try:
        return conn.execute(sql, params).fetchall()
    except sqlite3.OperationalError as exc:
        if is_busy(exc):
            raise Busy from exc
        raise


def fetch_described(
    conn: sqlite3.Connection, sql: str, params: dict[str, Any]
) -> tuple[list[str], Rows]:
    """Like ``fetch`` but also returns the column names."""
    try:
        cursor = conn.execute(sql, params)
        rows = cursor.fetchall()
    except sqlite3.OperationalError as exc:
        if is_busy(exc):
            raise Busy from exc
        raise
    return [d[0] for d in cursor.description or ()], rows


# -- group commit ------------------------------------------------------------------

#: One item's outcome: ``(now_ms, rows)`` or the exception that failed it alone.
Outcome = tuple[int, Rows] | BaseException


def run_batch(
    conn: sqlite3.Connection, items: Sequence[tuple[str, dict[str, Any]]]
) -> list[Outcome]:
    """Run single-statement writes: one bare, several in one ``BEGIN IMMEDIATE``.

    The caller answers nobody before this returns, i.e. after the COMMIT. A
    statement that fails on its own fails only its item, whatever the error: SQLite
    undoes a failed statement by itself (statement journal, ABORT resolution) and
    keeps the transaction, so no savepoint is needed, and a value the driver
    cannot bind fails before the statement runs. Only an error that tore the
    transaction down (I/O error, disk full) fails every item with it.
    """
    if len(items) == 1:
        sql, params = items[0]
        stamp(params, now_ms())
        try:
            return [(params["now_ms"], conn.execute(sql, params).fetchall())]
        except Exception as exc:
            _rollback_quietly(conn)
            if is_busy(exc):
                raise Busy from exc
            return [exc]
    begin(conn)
    outcomes: list[Outcome] = []
    try:
        start = 0
        while start < len(items):
            end = _mergeable_run(items, start)
            if end - start > 1:
                outcomes.extend(_insert_rows(conn, items[start:end]))
            else:
                outcomes.append(_run_one(conn, *items[start]))
            start = end
        conn.execute("commit")
    except BaseException as exc:
        _rollback_quietly(conn)
        # The transaction is gone: nothing in it was committed, so all fail.
        return [exc] * len(items)
    return outcomes


def _run_one(conn: sqlite3.Connection, sql: str, params: dict[str, Any]) -> Outcome:
    """One statement inside the batch's transaction; its own error is its outcome."""
    stamp(params, now_ms())
    try:
        return (params["now_ms"], conn.execute(sql, params).fetchall())
    except Exception as exc:
        if not conn.in_transaction:
            raise  # the transaction was torn down: the whole batch fails
        return exc


#: Consecutive ``insert_task`` items of a batch are written by ``insert_tasks``
#: (one statement, its rows as one JSON parameter; stepping the rows one by one
#: costs ~1.5x the CPU). The values each row carries, in the file's order.
_INSERT_ONE = statement("sqlite", "insert_task")
_INSERT_MANY = statement("sqlite", "insert_tasks")
_INSERT_ROW = operator.itemgetter(
    "id",
    "name",
    "queue",
    "payload",
    "metadata",
    "max_attempts",
    "priority",
    "parent_id",
    "root_id",
    "correlation_id",
    "delay_ms",
)
#: A NUL character as JSON writes it; ``insert_tasks`` cannot carry one.
_JSON_NUL = "\\u0000"


def _mergeable_run(items: Sequence[tuple[str, dict[str, Any]]], start: int) -> int:
    """End of the run of ``insert_task`` items beginning at ``start``."""
    end = start + 1
    if items[start][0] != _INSERT_ONE:
        return end
    while end < len(items) and items[end][0] == _INSERT_ONE:
        end += 1
    return end


def _insert_rows(
    conn: sqlite3.Connection, items: Sequence[tuple[str, dict[str, Any]]]
) -> list[Outcome]:
    """Consecutive ``insert_task`` items as one ``insert_tasks`` (one statement, one clock).

    Each row still succeeds or fails on its own: if the merged statement fails
    (SQLite undid all of it) or its rows cannot travel as JSON, the rows run
    one by one to find whose it was.
    """
    now = now_ms()
    try:
        rows = orjson.dumps([_INSERT_ROW(params) for _, params in items]).decode()
        if _JSON_NUL in rows:
            raise ValueError("a NUL character cannot travel in insert_tasks' JSON")
        conn.execute(_INSERT_MANY, {"rows": rows, "now_ms": now})
    except Exception:  # a statement error, or a value JSON cannot carry
        if not conn.in_transaction:
            raise
        return [_run_one(conn, sql, params) for sql, params in items]
    return [(now, [])] * len(items)


# -- transactions ----------------------------------------------------------------


def begin(conn: sqlite3.Connection) -> None:
    """``BEGIN IMMEDIATE``; ``Busy`` if another connection holds the write lock."""
    try:
        conn.execute("begin immediate")
    except sqlite3.Error as exc:
        _rollback_quietly(conn)
        if is_busy(exc):
            raise Busy from exc
        raise


def commit(conn: sqlite3.Connection) -> None:
    """COMMIT, or ROLLBACK and re-raise if the commit fails."""
    try:
        conn.execute("commit")
    except BaseException:
        _rollback_quietly(conn)
        raise


def rollback(conn: sqlite3.Connection) -> None:
    """End whatever transaction is open, ignoring errors."""
    _rollback_quietly(conn)


def begin_with(conn: sqlite3.Connection, sql: str, params: dict[str, Any]) -> Rows:
    """Open a transaction and run its first statement; it stays open on success.

    Used by the multi-step claim session, whose caller commits or rolls back.
    """
    begin(conn)
    try:
        return run(conn, sql, params)
    except BaseException:
        _rollback_quietly(conn)
        raise


def begin_settling(
    conn: sqlite3.Connection,
    settles: Sequence[tuple[str, dict[str, Any]]],
    first: tuple[str, dict[str, Any]],
) -> tuple[list[Rows], Rows] | Exception:
    """Open a transaction, run each of ``settles`` then ``first``; it stays open on success.

    The completing claim session's start: the settlements of finished tasks,
    then lease recovery, all inside the transaction the session's draws join.
    ``Busy`` when BEGIN was refused (nothing done). An error of any statement
    rolls the transaction back and is returned, not raised, so the caller can
    tell it from ``Busy`` and write the settlements on their own.
    """
    begin(conn)
    try:
        settled = [run(conn, *settle) for settle in settles]
        return settled, run(conn, *first)
    except Exception as exc:
        _rollback_quietly(conn)
        return exc
    except BaseException:
        _rollback_quietly(conn)
        raise


def run(conn: sqlite3.Connection, sql: str, params: dict[str, Any]) -> Rows:
    """One statement inside an open transaction (a claim session's draw)."""
    stamp(params, now_ms())
    return conn.execute(sql, params).fetchall()


def refresh_statistics(conn: sqlite3.Connection) -> None:
    """Bootstrap planner statistics (ANALYZE once), else ``PRAGMA optimize``.

    Without statistics the partial lease index is never chosen, and before
    SQLite 3.46 ``PRAGMA optimize`` never produces first statistics. Errors are
    ignored: statistics only steer the planner. ``analysis_limit`` makes ANALYZE
    sample each index instead of reading it whole, so a big table costs
    milliseconds, not seconds of holding the write lock.
    """
    try:
        conn.execute("pragma analysis_limit = 1000")
        has_table = conn.execute(
            "select 1 from sqlite_master where type = 'table' and name = 'sqlite_stat1'"
        ).fetchone()
        has_rows = (
            has_table
            and conn.execute(
                "select 1 from sqlite_stat1 where tbl = 'cairnq_tasks' limit 1"
            ).fetchone()
        )
        conn.execute("pragma optimize" if has_rows else "analyze cairnq_tasks")
    except sqlite3.Error:
        _rollback_quietly(conn)


def refresh_statistics_waiting(conn: sqlite3.Connection) -> None:
    """``refresh_statistics`` off the writer thread: wait briefly for the write lock.

    On the housekeeping thread a write lock held by the writer's commit is the
    common case, not a contended database; waiting a moment there blocks no one.
    """
    with contextlib.suppress(sqlite3.Error):
        conn.execute(WAIT_FOR_RESTART)
    try:
        refresh_statistics(conn)
    finally:
        with contextlib.suppress(sqlite3.Error):
            conn.execute(NEVER_WAIT)


def transaction(
    conn: sqlite3.Connection,
    steps: Sequence[tuple[str, dict[str, Any]]],
) -> list[Rows]:
    """Run fixed statements in one ``BEGIN IMMEDIATE`` transaction; rows per step."""
    begin(conn)
    try:
        now = now_ms()
        out = []
        for sql, params in steps:
            stamp(params, now)
            out.append(conn.execute(sql, params).fetchall())
        conn.execute("commit")
    except BaseException:
        _rollback_quietly(conn)
        raise
    return out


# -- opening -----------------------------------------------------------------------


def split_script(script: str) -> list[str]:
    """A migration's statements in order, to run inside a transaction we control.

    (``executescript`` would commit on its own.) The script is cut only at a
    ``;`` where ``sqlite3.complete_statement`` sees a whole statement, so a
    ``;`` in a trigger body, a string literal or a comment stays inside.

    Raises:
        ValueError: text other than comments follows the last whole statement.
    """
    pieces: list[str] = []
    begin = 0
    semicolon = script.find(";")
    while semicolon >= 0:
        piece = script[begin : semicolon + 1]
        if sqlite3.complete_statement(piece):
            pieces.append(piece.strip())
            begin = semicolon + 1
        semicolon = script.find(";", semicolon + 1)
    leftover = [
        text
        for text in (raw.strip() for raw in script[begin:].splitlines())
        if text and not text.startswith("--")
    ]
    if leftover:
        raise ValueError(f"migration ends with an incomplete statement: {leftover[0][:80]!r}")
    return pieces


def _table_exists(conn: sqlite3.Connection, name: str) -> bool:
    row = conn.execute(
        "select 1 from sqlite_master where type = 'table' and name = ?", (name,)
    ).fetchone()
    return row is not None


def read_protocol_version(conn: sqlite3.Connection, sql: str) -> int:
    """The ``protocol_version`` meta value; 0 when the table or row is missing."""
    if not _table_exists(conn, "cairnq_meta"):
        return 0
    row = conn.execute(sql).fetchone()
    if row is None:
        return 0
    try:
        return int(row[0])
    except (TypeError, ValueError):
        return -1


def _enable_wal(conn: sqlite3.Connection) -> None:
    # Switching the journal mode returns SQLITE_BUSY at once instead of
    # waiting on busy_timeout, so retry every 50 ms for up to 5 s.
    deadline = time.monotonic() + 5.0
    while True:
        try:
            conn.execute("pragma journal_mode = wal").fetchall()
            return
        except sqlite3.OperationalError as exc:
            if not is_busy(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(0.05)


def apply_migrations(conn: sqlite3.Connection, migrations: Sequence[tuple[str, str]]) -> None:
    """Apply every migration the ledger lacks, one ``BEGIN IMMEDIATE`` each (§1.4).

    The ledger lookup happens inside the write lock, so concurrent cold starts
    (of this engine or any cairnq SDK) apply each migration exactly once.
    """
    conn.execute(statement("sqlite", "ledger_create"))
    applied = {row[0] for row in conn.execute(statement("sqlite", "ledger_names"))}
    for name, script in migrations:
        if name in applied:
            continue  # recorded rows are never removed, so skipping is safe
        conn.execute("begin immediate")
        try:
            found = conn.execute(statement("sqlite", "ledger_has"), {"name": name}).fetchone()
            if found is None:
                for sql in split_script(script):
                    conn.execute(sql)
                conn.execute(statement("sqlite", "ledger_add"), {"name": name, "now_ms": now_ms()})
            conn.execute("commit")
        except BaseException:
            _rollback_quietly(conn)
            raise


def open_database(
    conn: sqlite3.Connection,
    *,
    target: str,
    memory: bool,
    read_only: bool,
    migrate: bool,
    synchronous: str,
    migrations: Sequence[tuple[str, str]],
    protocol_version_sql: str,
) -> None:
    """The open sequence of §8, on the writer connection, ending with busy_timeout 0.

    ``conn`` comes with the store's busy timeout (``connect_timeout``): opening
    and migrating wait out other connections' locks.

    Raises:
        ProtocolVersionMismatch: the database speaks another protocol (checked
            before anything is written, and again after migrating).
        SchemaMismatch: the cairnq tables, indexes or triggers are not the
            protocol's (checked before anything is written; after migrating
            too when the ledger was incomplete).
        StoreUnavailable: not a SQLite database, or no cairnq tables while
            migrations are off.
    """
    try:
        # Reading the schema is the first real access: a file that is not a
        # database fails here, before anything is written.
        if _table_exists(conn, "cairnq_meta"):
            # A recorded version other than 1 is refused before anything is
            # written; a missing row is judged after migrating (it seeds one).
            row = conn.execute(protocol_version_sql).fetchone()
            if row is not None and row[0] != "1":
                raise ProtocolVersionMismatch(
                    f"{target} speaks cairnq protocol {row[0]!r}; this engine speaks 1"
                )
        # Before the first write (even the journal-mode switch changes the file).
        names = [name for name, _ in migrations]
        checked = check_sqlite(conn, names, target)
        if not memory and not read_only:
            _enable_wal(conn)
            set_durability(conn, synchronous)
        conn.execute("pragma foreign_keys = on")
        if migrate and not read_only:
            apply_migrations(conn, migrations)
            if not checked:
                check_sqlite(conn, names, target)
        elif not _table_exists(conn, "cairnq_tasks"):
            why = "read_only" if read_only else "migrate=False"
            raise StoreUnavailable(f"{target} has no cairnq tables and {why} forbids creating them")
        if not read_only:
            refresh_statistics(conn)
        version = read_protocol_version(conn, protocol_version_sql)
        if version != 1:
            raise ProtocolVersionMismatch(
                f"{target} speaks cairnq protocol {version}; this engine speaks 1"
            )
        # From here on a busy database is waited out by the async side's
        # backoff, so nothing ever sleeps inside SQLite.
        conn.execute(NEVER_WAIT)
        if not memory and not read_only:
            # Checkpoints run on a connection of the housekeeping thread instead
            # (checkpoint_passive, checkpoint_restart): inline commits must
            # never fsync on the loop.
            conn.execute("pragma wal_autocheckpoint = 0")
    except sqlite3.DatabaseError as exc:
        _rollback_quietly(conn)
        if is_busy(exc):
            raise
        raise StoreUnavailable(f"cannot open SQLite database {target}: {exc}") from exc


def open_checkpointer(path: str, uri: bool, synchronous: str) -> sqlite3.Connection:
    """A connection of the housekeeping thread: checkpoints, statistics.

    ``timeout=0``: housekeeping never waits for a lock; it is retried later.
    """
    conn = sqlite3.connect(path, uri=uri, timeout=0, isolation_level=None, check_same_thread=False)
    try:
        set_durability(conn, synchronous)
    except BaseException:
        conn.close()
        raise
    return conn


def checkpoint_passive(conn: sqlite3.Connection) -> int | None:
    """Copy committed WAL frames into the database; the WAL's frame count, None on error.

    PASSIVE never waits for readers or writers, so it runs beside the writer's
    commits (on the store's housekeeping thread). Under a steady stream of
    commits it never catches up either: new frames land while it copies, and
    SQLite only rewinds the WAL to its start when a writer begins with every
    frame copied; ``checkpoint_restart`` does that once the WAL grew too long.
    Errors are ignored: a checkpoint is housekeeping.
    """
    try:
        # (busy, frames in the WAL, frames copied)
        _busy, frames, _copied = conn.execute("pragma wal_checkpoint(passive)").fetchall()[0]
    except sqlite3.Error:
        return None
    return int(frames)


def checkpoint_restart(conn: sqlite3.Connection) -> None:
    """Copy whatever the passive checkpoints left and make the next commit rewind the WAL.

    A RESTART holds new writers off (waiting up to ``_RESTART_WAIT_MS`` for the
    write lock and readers) until everything is copied; the next commit then
    starts the WAL over, cut back to the size cap. The store runs it on its
    writer thread, between commits, so its own writers queue behind it instead
    of meeting SQLITE_BUSY and backing off. Errors are ignored.
    """
    with contextlib.suppress(sqlite3.Error):
        conn.execute(WAIT_FOR_RESTART)
        try:
            conn.execute("pragma wal_checkpoint(restart)").fetchall()
        finally:
            conn.execute(NEVER_WAIT)


def open_reader(
    path: str, *, uri: bool, synchronous: str, busy_timeout_ms: int = 0
) -> sqlite3.Connection:
    """A second connection for reads (WAL readers never block).

    ``busy_timeout_ms`` 0 (the event-loop reader): a read that would wait falls
    back to the writer thread; a reader off the loop may wait. ``query_only``
    makes a stray write through it impossible; it still gets the store's
    durability, since the last connection to close checkpoints the WAL.
    """
    reader = sqlite3.connect(
        path,
        uri=uri,
        timeout=connect_timeout(busy_timeout_ms),
        isolation_level=None,
        check_same_thread=False,
    )
    try:
        set_durability(reader, synchronous)
        reader.execute("pragma foreign_keys = on")
        reader.execute("pragma query_only = on")
    except BaseException:
        reader.close()
        raise
    return reader
