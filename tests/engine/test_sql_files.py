"""The SQL shipped in ``sql/``: one named statement per file, same names per dialect,
a header comment on every file, and the migration lists of the protocol
(docs/protocol-notes.md, "Schema and migrations")."""

from __future__ import annotations

import re
import sqlite3

import pytest
from schema_names import POSTGRES_MIGRATIONS, SQLITE_MIGRATIONS, statement_names

from engine._sql import Dialect, migrations, parameters, sql_root, statement

DIALECTS: tuple[Dialect, ...] = ("sqlite", "postgres")


# The 27 statements every dialect has; both add the group commit's multi-row
# `insert_tasks`, Postgres adds `installations` (docs/protocol-notes.md, "Statements").
PROTOCOL_STATEMENTS = frozenset(
    {
        "insert_task",
        "lock_key",
        "get_key",
        "upsert_key",
        "get",
        "get_by_key",
        "get_status",
        "get_status_by_key",
        "list",
        "stats",
        "queue_depth",
        "cancel",
        "retry",
        "purge",
        "claimable_probe",
        "recover_leases",
        "claim",
        "claim_one_queue",
        "claim_one_name",
        "claim_one_queue_one_name",
        "heartbeat",
        "heartbeat_batch",
        "progress",
        "succeed",
        "complete",
        "fail",
        "protocol_version",
    }
)


def test_protocol_statements_exist_in_both_dialects() -> None:
    assert len(PROTOCOL_STATEMENTS) == 27
    for dialect in DIALECTS:
        missing = PROTOCOL_STATEMENTS - statement_names(dialect)
        assert not missing, f"{dialect} lacks {sorted(missing)}"


def test_both_dialects_ship_the_same_statement_names() -> None:
    # the schema guard's read; Postgres locks the ledger, SQLite takes BEGIN
    # IMMEDIATE; the health check's read of the server itself (clock, durability
    # settings), which a SQLite file does not have; the schema check's triggers
    # (SQLite's come with its schema_objects); purge of one queue, walking the
    # queue's completion index (spelled apart so its plan needs no statistics)
    postgres_only = {
        "installations",
        "ledger_lock",
        "inspect_server",
        "schema_triggers",
        "purge_in_queue",
    }
    # purge without a queue, in completion order (the planner needs it spelled
    # apart); the schema check's read of the tables, indexes and triggers at once
    sqlite_only = {"purge_by_age", "schema_objects"}
    assert statement_names("postgres") - postgres_only == statement_names("sqlite") - sqlite_only
    assert postgres_only <= statement_names("postgres")
    assert sqlite_only <= statement_names("sqlite")


@pytest.mark.parametrize("dialect", DIALECTS)
def test_every_statement_file_has_a_header_comment_and_one_statement(dialect: Dialect) -> None:
    for name in sorted(statement_names(dialect)):
        text = (sql_root() / dialect / f"{name}.sql").read_text(encoding="utf-8")
        first = text.lstrip().splitlines()[0] if text.strip() else ""
        assert first.startswith("--"), f"{dialect}/{name}.sql starts without a header comment"
        body = statement(dialect, name)
        assert body, f"{dialect}/{name}.sql holds no statement"
        # One statement per file: no semicolon survives outside string literals.
        assert ";" not in re.sub(r"'[^']*'", "''", body), (
            f"{dialect}/{name}.sql: several statements"
        )


def test_sqlite_statements_are_single_complete_statements() -> None:
    for name in statement_names("sqlite"):
        text = statement("sqlite", name)
        assert sqlite3.complete_statement(text + ";"), name


@pytest.mark.parametrize(
    ("dialect", "expected"), [("sqlite", SQLITE_MIGRATIONS), ("postgres", POSTGRES_MIGRATIONS)]
)
def test_migration_lists_match_the_protocol(dialect: Dialect, expected: list[str]) -> None:
    found = migrations(dialect)
    assert [name for name, _ in found] == expected
    for name, script in found:
        assert script.strip(), f"migration {dialect}/{name} is empty"


def test_migration_scripts_never_name_a_schema() -> None:
    # §1.5: no object is schema-qualified, so a schema option can relocate them.
    for dialect in DIALECTS:
        for name, script in migrations(dialect):
            assert not re.search(r"\b(public|main)\.cairnq_", script), f"{dialect}/{name}"


def test_each_dialect_writes_parameters_in_its_drivers_style() -> None:
    """The files run as written: sqlite3 takes ``:name``, psycopg ``%(name)s`` (no
    Python converts one into the other), and a statement both dialects have takes
    the same parameters in both (the stores pass one mapping)."""
    colon = re.compile(r"(?<![:\w]):[A-Za-z_]\w*")
    pyformat = re.compile(r"%\([A-Za-z_]\w*\)s")
    for name in statement_names("sqlite"):
        assert not pyformat.search(statement("sqlite", name)), name
    for name in statement_names("postgres"):
        text = statement("postgres", name)
        assert not colon.search(text), f"postgres/{name}.sql: a :name parameter"
        # A lone % would be read by psycopg as a placeholder.
        assert "%" not in re.sub(r"%%|%\([A-Za-z_]\w*\)s", "", text), name
    # Where they differ, the clock is why (SQLite is handed now_ms and lease
    # deadlines, Postgres reads its own clock and takes lease_ms), or the dialect's
    # own means (Postgres's advisory lock, SQLite's raw JSON text for the error search).
    differ = {
        "claim", "claim_one_name", "claim_one_queue", "claim_one_queue_one_name",
        "heartbeat", "heartbeat_batch", "lock_key", "purge",
        "inspect_errors_failed_newer", "inspect_errors_failed_older", "inspect_errors_retrying",
    }  # fmt: skip
    shared = statement_names("sqlite") & statement_names("postgres")
    assert differ < shared and "insert_task" in shared - differ
    for name in shared - differ:
        assert parameters(statement("sqlite", name)) - {"now_ms"} == (
            parameters(statement("postgres", name)) - {"now_ms"}
        ), name
