"""Refuse, at open, a database whose cairnq schema is not the protocol's.

A file or schema can carry the cairnq tables and still not be a cairnq database:
a column dropped by hand, an index rebuilt on other columns, a trigger someone
added. Opening it anyway lets the engine write to it and then fail every list or
submit with a raw driver error. So each store reads the catalog once when it
opens (a few queries, no table scans) and compares it with the protocol's schema
(docs/protocol-notes.md, "Schema and migrations");
any difference raises ``SchemaMismatch`` naming it, before anything is written.

What is compared:

* tables ``cairnq_tasks``, ``cairnq_task_keys``, ``cairnq_meta`` and the ledger
  ``cairnq_migrations``: every protocol column present, with its type (SQLite:
  the declared type's affinity; Postgres: the exact type), nullability and
  primary key; the key table's cascading foreign key;
* the protocol's indexes on ``cairnq_tasks``: present, on ``cairnq_tasks``,
  non-unique B-trees with the same key columns, directions and predicate;
  ``cairnq_tasks_status_idx`` absent (0010 drops it);
* triggers: none on SQLite; on Postgres exactly ``cairnq_tasks_notify`` as §1.7
  defines it, enabled (the foreign key's internal triggers are not counted).

What is allowed, because every SDK's statements still behave the same:

* an extra column that is nullable or has a default (or is generated): inserts
  that do not name it still succeed. An extra NOT NULL column without a default
  would make every SDK's insert fail, so it is refused;
* an extra non-unique index: it changes plans, never results. An extra UNIQUE
  index (or unique constraint) can reject writes the protocol accepts, so it is
  refused;
* tables that are not the protocol's, and ledger rows this engine does not know.

Not compared: defaults, CHECK constraints and the body of ``cairnq_notify()``.

Indexes and triggers change from one migration to the next, so they are judged
only once the ledger holds every migration this engine knows (before migrating
when it already does, otherwise right after migrating). Tables and columns are
final from ``0001_init.sql`` on and are judged whenever they exist.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from engine._errors import SchemaMismatch
from engine._sql import statement

Dialect = Literal["sqlite", "postgres"]
W = TypeVar("W")
H = TypeVar("H")


@dataclass(frozen=True)
class _Column:
    sqlite: str  # SQLite type affinity
    postgres: str  # format_type() spelling
    not_null: bool


def _col(sqlite: str, postgres: str, not_null: bool) -> _Column:
    return _Column(sqlite, postgres, not_null)


_TEXT, _TEXT_NULL = _col("TEXT", "text", True), _col("TEXT", "text", False)
_JSON, _JSON_NULL = _col("TEXT", "jsonb", True), _col("TEXT", "jsonb", False)
_INT = _col("INTEGER", "integer", True)
_MS, _MS_NULL = _col("INTEGER", "bigint", True), _col("INTEGER", "bigint", False)

#: §1.5: columns of each table, and its primary-key column.
_TABLES: dict[str, tuple[str, dict[str, _Column]]] = {
    "cairnq_tasks": (
        "id",
        {
            "id": _TEXT,
            "name": _TEXT,
            "queue": _TEXT,
            "status": _TEXT,
            "payload": _JSON,
            "result": _JSON_NULL,
            "error": _JSON_NULL,
            "metadata": _JSON,
            "progress": _col("REAL", "double precision", False),
            "message": _TEXT_NULL,
            "attempt": _INT,
            "max_attempts": _INT,
            "priority": _INT,
            "worker_id": _TEXT_NULL,
            "lease_until_ms": _MS_NULL,
            "run_at_ms": _MS,
            "cancel_requested_at_ms": _MS_NULL,
            "parent_id": _TEXT_NULL,
            "root_id": _TEXT_NULL,
            "correlation_id": _TEXT_NULL,
            "created_at_ms": _MS,
            "updated_at_ms": _MS,
            "completed_at_ms": _MS_NULL,
        },
    ),
    "cairnq_task_keys": (
        "key",
        {"key": _TEXT, "task_id": _TEXT, "created_at_ms": _MS, "updated_at_ms": _MS},
    ),
    "cairnq_meta": ("key", {"key": _TEXT, "value": _TEXT}),
    "cairnq_migrations": ("name", {"name": _TEXT, "applied_at_ms": _MS}),
}
_LEDGER = "cairnq_migrations"
#: Created by 0001 (the ledger is created by the runner, before any migration).
_INIT_TABLES = ("cairnq_tasks", "cairnq_task_keys", "cairnq_meta")

_RUNNING_LEASE = "status = 'running' and lease_until_ms is not null"
#: §1.6: key columns ("col desc" for descending) and the predicate per dialect,
#: in the spelling each catalog gives back (compared after _squeeze).
_INDEXES: dict[str, tuple[tuple[str, ...], dict[str, str]]] = {
    "cairnq_tasks_claim_idx": (("queue", "status", "priority desc", "run_at_ms", "id"), {}),
    "cairnq_tasks_claim_name_idx": (
        ("queue", "status", "name", "priority desc", "run_at_ms", "id"),
        {},
    ),
    "cairnq_tasks_name_idx": (("name",), {}),
    "cairnq_tasks_root_idx": (("root_id",), {}),
    "cairnq_tasks_correlation_idx": (("correlation_id",), {}),
    "cairnq_tasks_completed_idx": (("completed_at_ms",), {}),
    "cairnq_tasks_lease_idx": (
        ("lease_until_ms",),
        {"sqlite": _RUNNING_LEASE, "postgres": _RUNNING_LEASE},
    ),
    "cairnq_tasks_status_completed_idx": (("status", "completed_at_ms"), {}),
    "cairnq_tasks_queue_completed_idx": (
        ("queue", "completed_at_ms"),
        {
            "sqlite": "status in ('succeeded', 'failed', 'canceled')",
            "postgres": "status = any (array['succeeded', 'failed', 'canceled'])",
        },
    ),
}
_DROPPED_INDEX = "cairnq_tasks_status_idx"

#: §1.7, as pg_get_triggerdef prints it with the schema on the search path.
_NOTIFY_TRIGGER = "cairnq_tasks_notify"
_NOTIFY_TRIGGER_DEF = (
    "create trigger cairnq_tasks_notify after insert or update of status on cairnq_tasks "
    "for each row when ((new.status is distinct from 'running')) "
    "execute function cairnq_notify()"
)


@dataclass
class ColumnInfo:
    """One column as the catalog describes it."""

    type: str
    not_null: bool
    has_default: bool
    primary_key: bool


@dataclass
class IndexInfo:
    """One index as the catalog describes it."""

    table: str
    columns: tuple[str, ...]
    unique: bool
    predicate: str | None
    method: str = "btree"


@dataclass
class Catalog:
    """The part of a database's catalog the protocol constrains."""

    tables: dict[str, dict[str, ColumnInfo]] = field(default_factory=dict)
    indexes: dict[str, IndexInfo] = field(default_factory=dict)
    #: trigger name -> (table, normalised definition; "" on SQLite, disabled or not)
    triggers: dict[str, tuple[str, str, bool]] = field(default_factory=dict)
    #: (table, column, referenced table, referenced column, on delete cascade)
    foreign_keys: set[tuple[str, str, str, str, bool]] = field(default_factory=set)
    ledger: set[str] | None = None


def _squeeze(sql: str) -> str:
    """Compare-form of an expression: lower case, no blanks, parentheses or ::text."""
    return re.sub(r"\s+|[()]|::text", "", sql.lower())


def _affinity(declared: str) -> str:
    """SQLite's type affinity rules (datatype3.html §3.1) for a declared type."""
    upper = declared.upper()
    if "INT" in upper:
        return "INTEGER"
    if any(word in upper for word in ("CHAR", "CLOB", "TEXT")):
        return "TEXT"
    if not upper or "BLOB" in upper:
        return "BLOB"
    if any(word in upper for word in ("REAL", "FLOA", "DOUB")):
        return "REAL"
    return "NUMERIC"


# -- reading the catalog ---------------------------------------------------------------

#: The tables whose catalog the checks read (the ``:tables`` of ``schema_*.sql``).
_TABLE_NAMES = list(_TABLES)
_SQLITE_TABLES = {"tables": json.dumps(_TABLE_NAMES)}
_POSTGRES_TABLES = {"tables": _TABLE_NAMES}


def _sqlite_sql(name: str) -> str:
    return statement("sqlite", name)


def _postgres_sql(name: str) -> str:
    return statement("postgres", name)


_WHERE = re.compile(r"\bwhere\b(.*)$", re.IGNORECASE | re.DOTALL)


def read_sqlite(conn: sqlite3.Connection) -> Catalog:
    """The catalog of a SQLite database (five reads of the schema, no table scans)."""
    catalog = Catalog()
    predicates: dict[str, str | None] = {}
    for kind, name, table, sql in conn.execute(_sqlite_sql("schema_objects"), _SQLITE_TABLES):
        if kind == "table":
            catalog.tables[name] = {}
        elif kind == "trigger":
            catalog.triggers[name] = (table, "", True)
        elif kind == "index" and sql:
            found = _WHERE.search(sql)
            predicates[name] = found.group(1) if found else None
    for table, name, declared, not_null, has_default, pk in conn.execute(
        _sqlite_sql("schema_columns"), _SQLITE_TABLES
    ):
        catalog.tables[table][name] = ColumnInfo(
            _affinity(declared or ""), bool(not_null), bool(has_default), pk > 0
        )
    for table, index, unique, origin, column, desc in conn.execute(
        _sqlite_sql("schema_indexes"), _SQLITE_TABLES
    ):
        if origin == "pk":
            continue  # the primary key's own index: judged through the columns
        info = catalog.indexes.setdefault(
            index, IndexInfo(table, (), bool(unique), predicates.get(index))
        )
        info.columns += (f"{column} desc" if desc else str(column),)
    for table, column, target, target_column, on_delete in conn.execute(
        _sqlite_sql("schema_foreign_keys"), _SQLITE_TABLES
    ):
        cascade = str(on_delete).upper() == "CASCADE"
        catalog.foreign_keys.add((table, column, target, target_column, cascade))
    if _LEDGER in catalog.tables:
        catalog.ledger = {row[0] for row in conn.execute(_sqlite_sql("ledger_names"))}
    return catalog


def check_sqlite(conn: sqlite3.Connection, migration_names: Iterable[str], target: str) -> bool:
    """``verify`` the SQLite database on ``conn``; True if the full check ran.

    The reads share one read transaction: a concurrent cold start committing
    migrations between them would otherwise pair a complete ledger with an
    older set of indexes.
    """
    conn.execute("begin")
    try:
        catalog = read_sqlite(conn)
    finally:
        conn.execute("rollback")
    return verify(catalog, "sqlite", migration_names, target)


_SCHEMA_PREFIX = re.compile(r'(?:"[^"]*"|[\w$]+)\.(?=cairnq_)')


def postgres_catalog(
    columns: Iterable[Mapping[str, Any]],
    indexes: Iterable[Mapping[str, Any]],
    triggers: Iterable[Mapping[str, Any]],
    foreign_keys: Iterable[Mapping[str, Any]],
    ledger: Iterable[Mapping[str, Any]] | None,
) -> Catalog:
    """Build the catalog from the rows of the ``POSTGRES_*`` queries (the store runs them)."""
    catalog = Catalog()
    primary: dict[str, tuple[str, ...]] = {}
    for row in indexes:
        if row["is_primary"]:
            primary[row["table_name"]] = tuple(row["columns"])
            continue
        catalog.indexes[row["index_name"]] = IndexInfo(
            row["table_name"],
            tuple(row["columns"]),
            bool(row["is_unique"]),
            row["predicate"],
            row["method"],
        )
    for row in columns:
        table, name = row["table_name"], row["column_name"]
        catalog.tables.setdefault(table, {})[name] = ColumnInfo(
            row["type"],
            bool(row["not_null"]),
            bool(row["has_default"]),
            primary.get(table) == (name,),
        )
    for row in triggers:
        # pg_get_triggerdef always qualifies the table, and the function when it
        # is not on the search path: compare without the schema.
        definition = _SCHEMA_PREFIX.sub("", row["definition"].lower())
        definition = definition.replace("execute procedure", "execute function")
        catalog.triggers[row["trigger_name"]] = (row["table_name"], definition, row["enabled"])
    for row in foreign_keys:
        catalog.foreign_keys.add(
            (
                row["table_name"],
                row["column_name"],
                row["target"],
                row["target_column"],
                bool(row["cascade"]),
            )
        )
    if ledger is not None:
        catalog.ledger = {row["name"] for row in ledger}
    return catalog


async def read_postgres(conn: Any) -> Catalog:
    """The catalog of the current schema, read on the psycopg ``conn`` (dict rows).

    One snapshot for every read: a concurrent cold start committing migrations
    between them would pair a complete ledger with older indexes.
    """
    await conn.execute("begin isolation level repeatable read read only")
    try:
        columns = await (
            await conn.execute(_postgres_sql("schema_columns"), _POSTGRES_TABLES)
        ).fetchall()
        ledger = None
        if any(row["table_name"] == _LEDGER for row in columns):
            ledger = await (await conn.execute(_postgres_sql("ledger_names"))).fetchall()
        async with conn.pipeline():
            reads = [
                await conn.execute(_postgres_sql(name), _POSTGRES_TABLES)
                for name in ("schema_indexes", "schema_triggers", "schema_foreign_keys")
            ]
        indexes, triggers, foreign_keys = [await cur.fetchall() for cur in reads]
    finally:
        await conn.execute("rollback")
    return postgres_catalog(columns, indexes, triggers, foreign_keys, ledger)


# -- judging it ------------------------------------------------------------------------


def ledger_complete(catalog: Catalog, migration_names: Iterable[str]) -> bool:
    """True when the ledger records every migration this engine knows."""
    return catalog.ledger is not None and set(migration_names) <= catalog.ledger


def differences(catalog: Catalog, dialect: Dialect, *, complete: bool) -> list[str]:
    """How ``catalog`` differs from the protocol's schema; empty if it does not.

    Args:
        catalog: what the database holds.
        dialect: which column types and predicates to expect.
        complete: judge indexes and triggers too (the ledger is complete).
    """
    found: list[str] = []
    if complete or (catalog.ledger is not None and "0001_init.sql" in catalog.ledger):
        required = set(_TABLES) if complete else {*_INIT_TABLES, _LEDGER}
        found += [
            f"table {t} missing" for t in _TABLES if t in required and t not in catalog.tables
        ]
    for table, (pk, expected) in _TABLES.items():
        if table in catalog.tables:
            found += _column_differences(table, pk, expected, catalog.tables[table], dialect)
    cascade = ("cairnq_task_keys", "task_id", "cairnq_tasks", "id", True)
    both = {"cairnq_task_keys", "cairnq_tasks"} <= catalog.tables.keys()
    if both and cascade not in catalog.foreign_keys:
        found.append(
            "table cairnq_task_keys: foreign key task_id -> cairnq_tasks(id) "
            "on delete cascade missing"
        )
    if complete:
        found += _index_differences(catalog, dialect)
        found += _trigger_differences(catalog, dialect)
    return found


def _present(
    expected: Mapping[str, W], actual: Mapping[str, H], kind: str, found: list[str]
) -> Iterator[tuple[str, W, H]]:
    """``(name, expected, actual)`` for each expected name present; the others are
    reported in ``found`` as missing."""
    for name, want in expected.items():
        have = actual.get(name)
        if have is None:
            found.append(f"{kind} {name} missing")
        else:
            yield name, want, have


def _column_differences(
    table: str,
    pk: str,
    expected: Mapping[str, _Column],
    actual: Mapping[str, ColumnInfo],
    dialect: Dialect,
) -> list[str]:
    found: list[str] = []
    for name, want, have in _present(expected, actual, f"table {table}: column", found):
        want_type = want.sqlite if dialect == "sqlite" else want.postgres
        if have.type != want_type:
            found.append(f"table {table}: column {name} has type {have.type}, expected {want_type}")
        # SQLite reports a TEXT primary key as nullable; the key is what matters.
        if have.not_null != want.not_null and not (name == pk and dialect == "sqlite"):
            found.append(
                f"table {table}: column {name} is "
                + (
                    "not null, expected nullable"
                    if have.not_null
                    else "nullable, expected not null"
                )
            )
        if have.primary_key != (name == pk):
            found.append(
                f"table {table}: column {name} "
                + ("is part of the primary key" if have.primary_key else "is not the primary key")
            )
    # SQLite rows are decoded by position: an extra column may only come after
    # the protocol's, which keep their order.
    leading = list(actual)[: len(expected)]
    if dialect == "sqlite" and expected.keys() <= actual.keys() and leading != list(expected):
        found.append(
            f"table {table}: columns out of the protocol's order "
            "(extra columns may only follow the protocol's)"
        )
    for name, have in actual.items():
        if name not in expected and have.not_null and not have.has_default:
            found.append(
                f"table {table}: extra column {name} is not null without a default "
                "(inserts that do not name it would fail)"
            )
    return found


def _index_differences(catalog: Catalog, dialect: Dialect) -> list[str]:
    found: list[str] = []
    for name, (columns, predicates), have in _present(_INDEXES, catalog.indexes, "index", found):
        if have.table != "cairnq_tasks":
            found.append(f"index {name} is on {have.table}, expected cairnq_tasks")
        if have.columns != columns:
            found.append(
                f"index {name}: columns ({', '.join(have.columns)}), "
                f"expected ({', '.join(columns)})"
            )
        if have.unique:
            found.append(f"index {name} is unique, expected non-unique")
        if have.method != "btree":
            found.append(f"index {name} uses {have.method}, expected btree")
        want = predicates.get(dialect)
        if _squeeze(have.predicate or "") != _squeeze(want or ""):
            found.append(
                f"index {name}: predicate {have.predicate or '(none)'}, expected {want or '(none)'}"
            )
    if _DROPPED_INDEX in catalog.indexes:
        found.append(f"index {_DROPPED_INDEX} exists (0010_drop_status_index.sql drops it)")
    for name, have in catalog.indexes.items():
        if name not in _INDEXES and have.table in _TABLES and have.unique:
            found.append(
                f"extra unique index {name} on {have.table} (it can refuse writes the protocol "
                "accepts)"
            )
    return found


def _trigger_differences(catalog: Catalog, dialect: Dialect) -> list[str]:
    found: list[str] = []
    expected = {} if dialect == "sqlite" else {_NOTIFY_TRIGGER: _NOTIFY_TRIGGER_DEF}
    for name, definition, (_, actual, enabled) in _present(
        expected, catalog.triggers, "trigger", found
    ):
        if _squeeze(actual) != _squeeze(definition):
            found.append(f"trigger {name}: definition {actual!r}, expected {definition!r}")
        if not enabled:
            found.append(f"trigger {name} is disabled")
    for name, (table, _, _) in catalog.triggers.items():
        if name not in expected:
            found.append(f"extra trigger {name} on {table}")
    return found


def verify(catalog: Catalog, dialect: Dialect, migration_names: Iterable[str], target: str) -> bool:
    """Raise ``SchemaMismatch`` naming every difference; True if the full check ran.

    The full check (indexes and triggers too) runs when the ledger is complete;
    otherwise only what is final from 0001 on, and the caller checks again after
    migrating.
    """
    complete = ledger_complete(catalog, migration_names)
    found = differences(catalog, dialect, complete=complete)
    if found:
        raise SchemaMismatch(
            f"{target} does not have the cairnq protocol's schema: " + "; ".join(found)
        )
    return complete
