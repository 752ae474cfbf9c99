"""What the dialect-parametrised store tests share (the fixtures live in conftest.py)."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from engine import PostgresStore, SQLiteStore, TaskStore

#: Parametrise over both dialects; the Postgres param carries the postgres mark.
DIALECTS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@dataclass(frozen=True)
class Database:
    """The store's tables through a connection of its own.

    SQL uses ``?`` placeholders and only what both dialects understand.
    """

    dialect: str
    sqlite_path: Path | None = None
    dsn: str | None = None
    schema: str | None = None

    def rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        if self.sqlite_path is not None:
            with sqlite3.connect(self.sqlite_path) as conn:
                return conn.execute(sql, params).fetchall()
        import psycopg

        options = f"-c search_path={self.schema}"
        with psycopg.connect(str(self.dsn), autocommit=True, options=options) as conn:
            cur = conn.execute(sql.replace("?", "%s"), params)
            return cur.fetchall() if cur.description else []

    def execute(self, sql: str) -> None:
        """Run DDL (a script on SQLite; one statement on Postgres)."""
        if self.sqlite_path is not None:
            with sqlite3.connect(self.sqlite_path) as conn:
                conn.executescript(sql)
            return
        self.rows(sql)

    def twin(self) -> TaskStore:
        """Another, unconnected store on the same database (another handle)."""
        if self.sqlite_path is not None:
            # The path as a string where the fixture used a Path: one database
            # however it is spelled.
            return SQLiteStore(str(self.sqlite_path))
        return PostgresStore(str(self.dsn), schema=self.schema, max_size=4)

    def snapshot(self) -> list[list[tuple[Any, ...]]]:
        """Every row of the task and key tables, for "nothing was written"."""
        return [
            self.rows("select * from cairnq_tasks order by id"),
            self.rows("select * from cairnq_task_keys order by key"),
        ]
