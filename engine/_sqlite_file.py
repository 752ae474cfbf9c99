"""What a SQLite path holds, looked at read-only before anything opens it as a store."""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Literal


@dataclass(frozen=True, slots=True)
class SQLiteFileKind:
    """What a path holds, checked read-only before a store opens (and migrates) it.

    ``kind``: ``"missing"``, ``"empty"`` (a zero-byte file), ``"cairnq"`` (has
    ``cairnq_tasks``), ``"foreign"`` (a SQLite database without it; ``tables``
    lists what it holds) or ``"not-sqlite"`` (``detail`` says why).
    """

    kind: Literal["missing", "empty", "cairnq", "foreign", "not-sqlite"]
    tables: tuple[str, ...] = ()
    detail: str = ""


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
        conn = sqlite3.connect(file.resolve().as_uri() + "?mode=ro", uri=True)
        try:
            rows = conn.execute(
                "select name from sqlite_master where type = 'table' order by name"
            ).fetchall()
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        return SQLiteFileKind("not-sqlite", detail=str(exc))
    tables = tuple(str(r[0]) for r in rows)
    return SQLiteFileKind("cairnq" if "cairnq_tasks" in tables else "foreign", tables)
