"""Postgres schema work on connect: cold start, guard, catalog check, migrations.

The sequence of docs/protocol-notes.md, "Postgres", on one session opened for it
(before the pool): create the schema if one is named and missing, the schema
guard's decision table, the catalog check (before anything is written; again
after migrating when the ledger was incomplete), the migrations (one transaction
each, under an exclusive lock on the ledger), the protocol version, and what the
store learns about the wire (are jsonb values decoded? are task rows in the
protocol's column order?).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from engine._errors import ProtocolVersionMismatch, SchemaMismatch
from engine._sql import migrations
from engine.store import _schema_check as schema_check
from engine.store._base import ROW_COLUMNS
from engine.store._pg_statements import _sql

Conn = psycopg.AsyncConnection[dict[str, Any]]

#: A schema name the store accepts (it is quoted into DDL and ``search_path``).
SCHEMA_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]*$")
PROTOCOL_VERSION = 1

# Cold starts create the schema and the ledger "if not exists", which still
# races in the catalog (23505 on the namespace, 42710 on the ledger's row type)
# when two sessions create at once. Each creation runs in a transaction holding
# this advisory lock: the two-int form, a lock space apart from the bigint keys
# the keyed submits lock (§4.2); 1667327346 is "cair" in ASCII. Only this engine
# takes it, so _CATALOG_RACES still covers a cairnq SDK creating concurrently.
_COLD_START_LOCK = "select pg_advisory_xact_lock(1667327346, 0)"
_CATALOG_RACES = (
    psycopg.errors.UniqueViolation,
    psycopg.errors.DuplicateObject,
    psycopg.errors.DuplicateTable,
    psycopg.errors.DuplicateSchema,
)
_CREATE_SCHEMA = sql.SQL("create schema if not exists {}")
_SCHEMA_EXISTS = "select 1 from pg_catalog.pg_namespace where nspname = %(schema)s"
# Wire-form detection (§2.2): do jsonb values arrive decoded or as JSON text?
_JSON_PROBE = "select '\"cairnq\"'::jsonb as probe"
# The task table's column order (no row read).
_TABLE_SHAPE = "select * from cairnq_tasks limit 0"


@dataclass(frozen=True, slots=True)
class Opened:
    """What connecting learned about the database, for the store's decoding."""

    #: jsonb values arrive decoded (else as JSON text).
    json_decoded: bool
    #: The task table's columns start with the protocol's, in its order: rows
    #: may be decoded by position.
    positional: bool


async def prepare(
    conn: Conn, *, schema: str | None, read_only: bool, migrate: bool, target: str
) -> Opened:
    """The whole open sequence on ``conn`` (an autocommit session).

    Raises:
        SchemaMismatch: the schema in use is not the one holding the tables, or
            its tables, indexes or triggers are not the protocol's (nothing is
            written).
        ProtocolVersionMismatch: the database speaks another protocol version.
        psycopg.OperationalError: the connection failed (the store maps it).
    """
    if schema is not None and not read_only:
        await create_schema(conn, schema)
    await guard_schema(conn, schema, target)
    checked = await check_schema(conn, target)  # before anything is written
    if migrate:
        await apply_migrations(conn)
        if not checked:
            await check_schema(conn, target)
    version = await read_protocol_version(conn)
    if version != PROTOCOL_VERSION:
        raise ProtocolVersionMismatch(
            f"{target} speaks cairnq protocol {version}, this engine speaks {PROTOCOL_VERSION}"
        )
    probe = await (await conn.execute(_JSON_PROBE)).fetchone()
    shape = await conn.execute(_TABLE_SHAPE)
    names = tuple(c.name for c in shape.description or ())
    return Opened(
        json_decoded=probe is not None and probe["probe"] == "cairnq",
        positional=names[: len(ROW_COLUMNS)] == ROW_COLUMNS,
    )


async def _create_if_missing(conn: Conn, ddl: str | sql.Composed) -> None:
    """Run one ``create ... if not exists`` of a cold start under the cold-start lock."""
    try:
        async with conn.transaction():
            await conn.execute(_COLD_START_LOCK)
            await conn.execute(ddl)
    except _CATALOG_RACES:
        pass  # a peer not taking the lock created it first: it exists, as wanted


async def create_schema(conn: Conn, schema: str) -> None:
    """Create ``schema`` if it does not exist (a name ``SCHEMA_NAME`` accepted)."""
    exists = await conn.execute(_SCHEMA_EXISTS, {"schema": schema})
    if await exists.fetchone() is None:
        # An identifier cannot be a parameter: psycopg quotes it into the statement.
        await _create_if_missing(conn, _CREATE_SCHEMA.format(sql.Identifier(schema)))


async def guard_schema(conn: Conn, schema: str | None, target: str) -> None:
    """The schema guard's decision table (docs/protocol-notes.md, Postgres)."""
    rows = await (await conn.execute(_sql("installations"))).fetchall()
    current = rows[0]["current_schema"] if rows else None
    found = [r["schema"] for r in rows if r["schema"] is not None]
    if schema is not None:
        if current != schema:
            raise SchemaMismatch(
                f"schema {schema!r} is not the current schema of {target} "
                f"(current_schema() = {current!r}); does it exist and is it on the "
                "search path?"
            )
        return
    if current is None or not found or current in found:
        return
    raise SchemaMismatch(
        f"{target} has cairnq tables in schema(s) {', '.join(found)} but the "
        f"session's current schema is {current!r}; pass schema= to pick one"
    )


async def check_schema(conn: Conn, target: str) -> bool:
    """``_schema_check.verify`` on the current schema; True if the full check ran."""
    catalog = await schema_check.read_postgres(conn)
    names = [name for name, _ in migrations("postgres")]
    return schema_check.verify(catalog, "postgres", names, target)


async def apply_migrations(conn: Conn) -> None:
    """§1.4: one transaction per migration under an exclusive ledger lock."""
    await _create_if_missing(conn, _sql("ledger_create"))
    for name, script in migrations("postgres"):
        async with conn.transaction():
            await conn.execute(_sql("ledger_lock"))
            seen = await (await conn.execute(_sql("ledger_has"), {"name": name})).fetchone()
            if seen is not None:
                continue
            # Multi-statement DDL needs the simple query protocol, which the
            # client-side-binding cursor uses.
            async with psycopg.AsyncClientCursor(conn) as cur:
                await cur.execute(script)
            await conn.execute(_sql("ledger_add"), {"name": name})


async def read_protocol_version(conn: Conn) -> int:
    """The ``protocol_version`` meta value; 0 when the table or row is missing."""
    try:
        row = await (await conn.execute(_sql("protocol_version"))).fetchone()
    except psycopg.errors.UndefinedTable:
        return 0  # an unmigrated database
    if row is None:
        return 0
    try:
        return int(row["value"])
    except (TypeError, ValueError):
        return 0
