"""The Postgres store: psycopg 3 (async) with psycopg-pool, database clock, jsonb.

Every operation is one named statement from ``sql/postgres`` on a pooled
autocommit connection, or one explicit transaction (keyed submits, ``*_by_key``,
claim sessions, transactional completion). Plain submits and the owned
single-row writes (heartbeat, progress, succeed, complete, fail) go through a
group commit (``_pg_group``): those arriving together share one pipelined
transaction (their inserts one multi-row statement), each caller answered
after its COMMIT. Statements are prepared
server-side on first use (``prepare_threshold=0``): the set of texts is small
and fixed.

Connecting follows docs/protocol-notes.md, Postgres: schema guard, migrations, protocol version,
JSON wire form, then the LISTEN connection in the background.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import math
import re
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import dict_row
from psycopg.types.json import set_json_loads
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from engine import _json, _rules
from engine._errors import (
    ProtocolVersionMismatch,
    SchemaMismatch,
    StoreClosed,
    StoreUnavailable,
)
from engine._models import Task
from engine._redaction import redact_dsn
from engine._sql import migrations, specialise, statement, to_pyformat
from engine.store import _schema_check as schema_check
from engine.store._base import (
    ROW_COLUMNS,
    StoreCapabilities,
    task_from_values,
)
from engine.store._faults import postgres_fault
from engine.store._pg_group import WriteGroup
from engine.store._pg_listener import Listener
from engine.store._pg_operations import WITHOUT_JIT, PostgresOperations
from engine.store._pg_pool import most_recent_first, terminated

T = TypeVar("T")
Conn = psycopg.AsyncConnection[dict[str, Any]]

SCHEMA_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]*$")
_PROTOCOL_VERSION = 1
#: After the pool kept a read waiting (``read_own_connection_after_s``), reads skip
#: the wait for a pooled connection this long: the pool is reconnecting.
_RECOVERING_S = 5.0

# The ledger is created by the SDK, not by a migration (§1.2); these three texts
# are the migration runner's own, not protocol statements.
_CREATE_LEDGER = (
    "create table if not exists cairnq_migrations ("
    "name text primary key, applied_at_ms bigint not null)"
)
_LOCK_LEDGER = "lock table cairnq_migrations in exclusive mode"
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
_LEDGER_HAS = "select 1 from cairnq_migrations where name = %(name)s"
_LEDGER_ADD = (
    "insert into cairnq_migrations (name, applied_at_ms) "
    "values (%(name)s, (extract(epoch from now()) * 1000)::bigint)"
)
# Wire-form detection (§2.2): do jsonb values arrive decoded or as JSON text?
_JSON_PROBE = "select '\"cairnq\"'::jsonb as probe"
# The task table's column order (no row read): see PostgresStore._positional.
_TABLE_SHAPE = "select * from cairnq_tasks limit 0"


def _sql(name: str, active: frozenset[str] | None = None) -> str:
    text = statement("postgres", name)
    if active is not None:
        text = specialise(text, active)
    return to_pyformat(text)


async def _create_if_missing(conn: Conn, ddl: str) -> None:
    """Run one ``create ... if not exists`` of a cold start under the cold-start lock."""
    try:
        async with conn.transaction():
            await conn.execute(_COLD_START_LOCK)
            await conn.execute(ddl)
    except _CATALOG_RACES:
        pass  # a peer not taking the lock created it first: it exists, as wanted


class PostgresStore(PostgresOperations):
    """A cairnq database in one Postgres schema.

    Args:
        dsn: a libpq connection string or URL.
        min_size: connections the pool keeps open.
        max_size: connections the pool may open.
        schema: the schema holding the tables (created if missing, set as the
            ``search_path`` of every pooled connection); None = the server's
            default search path.
        read_only: open sessions with ``default_transaction_read_only=on``, apply
            no migrations, and refuse writes locally.
        migrate: apply missing migrations on connect.
        connect_timeout_s: bound on opening a connection, and on waiting for a
            pooled one, so an unreachable server fails instead of hanging.
        read_own_connection_after_s: None (the default): reads wait for a pooled
            connection like writes. A number: a read that waited this long for
            one runs on a connection of its own instead (closed after it), and
            for a few seconds after the pool kept one waiting, the next ones do
            not wait. After
            an outage the pool reconnects with a growing back-off (1, 2, 4 … s);
            a console passes a short wait here so it is live as soon as the
            server answers rather than when the pool's next attempt comes.

    Raises:
        ValueError: malformed DSN, bad schema name or pool sizes.
    """

    text_refuses_nul = True

    dialect = "postgres"
    capabilities = StoreCapabilities(completing_claim=True, single_draw_commits=True)

    def __init__(
        self,
        dsn: str,
        *,
        min_size: int = 1,
        max_size: int = 10,
        schema: str | None = None,
        read_only: bool = False,
        migrate: bool = True,
        connect_timeout_s: float = 5.0,
        read_own_connection_after_s: float | None = None,
    ) -> None:
        _rules.text(dsn, "dsn")
        _rules.integer(min_size, "min_size", minimum=0)
        _rules.integer(max_size, "max_size", minimum=max(1, min_size))
        if schema is not None and (not isinstance(schema, str) or not SCHEMA_NAME.match(schema)):
            raise ValueError(f"schema must match {SCHEMA_NAME.pattern}, got {schema!r}")
        if not connect_timeout_s > 0:
            raise ValueError("connect_timeout_s must be > 0")
        if read_own_connection_after_s is not None and not read_own_connection_after_s >= 0:
            raise ValueError("read_own_connection_after_s must be >= 0 or None")
        self._own_after_s = read_own_connection_after_s
        #: Until when (monotonic) reads skip the wait for a pooled connection.
        self._pool_recovering_until = 0.0
        try:
            params = conninfo_to_dict(dsn)
        except psycopg.ProgrammingError as exc:
            detail = redact_dsn(" ".join(str(exc).split()), source=dsn)
            raise ValueError(f"malformed Postgres DSN {redact_dsn(dsn)!r}: {detail}") from exc
        self._dsn = dsn
        self._schema = schema
        self._read_only = read_only
        self._migrate = migrate and not read_only
        self._min_size = min_size
        self._max_size = max_size
        self._timeout_s = connect_timeout_s
        host = params.get("host") or params.get("hostaddr") or "localhost"
        identity = f"postgres://{host}:{params.get('port') or 5432}/{params.get('dbname') or ''}"
        super().__init__(f"{identity}#{schema or ''}")

        options = [str(params["options"])] if params.get("options") else []
        if schema is not None:
            options.append(f'-c search_path="{schema}"')
        if read_only:
            options.append("-c default_transaction_read_only=on")
        self._session_kwargs: dict[str, Any] = {
            "connect_timeout": max(1, math.ceil(connect_timeout_s)),
        }
        if options:
            self._session_kwargs["options"] = " ".join(options)
        if not params.get("application_name"):
            self._session_kwargs["application_name"] = "cairnq-engine"

        self._pool: AsyncConnectionPool[Conn] | None = None
        self._listener: Listener | None = None
        self._json_decoded = True
        # The table's columns start with the protocol's, in its order (read on
        # connect): task rows may then be decoded by position.
        self._positional = False
        self._closed = False
        self._connect_lock = asyncio.Lock()
        self._inflight = 0
        self._drained: asyncio.Event | None = None
        self._group = WriteGroup(self._on_connection, _sql("insert_task"), _sql("insert_tasks"))

    # -- lifecycle -------------------------------------------------------------

    @property
    def target(self) -> str:
        """The DSN with its password redacted, plus the schema if one is set."""
        shown = redact_dsn(self._dsn)
        return f"{shown} (schema {self._schema})" if self._schema else shown

    @property
    def schema(self) -> str | None:
        """The schema option (None = the server's default search path)."""
        return self._schema

    @property
    def read_only(self) -> bool:
        """True if opened ``read_only=True`` (writes are refused locally)."""
        return self._read_only

    async def connect(self) -> None:
        """Guard the schema, migrate, check the protocol, open the pool and listener.

        Idempotent.

        Raises:
            StoreUnavailable: the server cannot be reached within the timeout.
            SchemaMismatch: the schema in use is not the one holding the tables, or
                its tables, indexes or triggers are not the protocol's (nothing
                is written).
            ProtocolVersionMismatch: the database speaks another protocol version.
            StoreClosed: the store was closed.
        """
        async with self._connect_lock:
            if self._closed:
                raise StoreClosed(f"store {self.target} is closed")
            if self._pool is not None:
                return
            conn = await self._open_session()
            try:
                if self._schema is not None and not self._read_only:
                    await self._create_schema(conn)
                await self._guard_schema(conn)
                checked = await self._check_schema(conn)  # before anything is written
                if self._migrate:
                    await self._apply_migrations(conn)
                    if not checked:
                        await self._check_schema(conn)
                version = await self._read_protocol_version(conn)
                if version != _PROTOCOL_VERSION:
                    raise ProtocolVersionMismatch(
                        f"{self.target} speaks cairnq protocol {version}, "
                        f"this engine speaks {_PROTOCOL_VERSION}"
                    )
                probe = await (await conn.execute(_JSON_PROBE)).fetchone()
                self._json_decoded = probe is not None and probe["probe"] == "cairnq"
                shape = await conn.execute(_TABLE_SHAPE)
                names = tuple(c.name for c in shape.description or ())
                self._positional = names[: len(ROW_COLUMNS)] == ROW_COLUMNS
            except psycopg.OperationalError as exc:
                raise self._unavailable(exc) from exc
            finally:
                await conn.close()
            pool: AsyncConnectionPool[Conn] = AsyncConnectionPool(
                self._dsn,
                min_size=self._min_size,
                max_size=self._max_size,
                kwargs=self._connection_kwargs(),
                configure=self._configure,
                open=False,
                timeout=self._timeout_s * 2,
                name=f"cairnq:{self.target}",
            )
            most_recent_first(pool)
            try:
                await pool.open(wait=self._min_size > 0, timeout=self._timeout_s * 2)
            except PoolTimeout as exc:
                await pool.close()
                raise self._unavailable(exc) from exc
            self._pool = pool
            listener_kwargs = dict(self._session_kwargs)
            listener_kwargs["application_name"] = "cairnq-engine-listener"
            self._listener = Listener(self._dsn, listener_kwargs, self.signals)
            self._listener.start()

    async def close(self) -> None:
        """Let accepted operations finish, then close the listener and the pool."""
        if self._closed:
            return
        self._closed = True
        async with self._connect_lock:
            if self._inflight:
                self._drained = asyncio.Event()
                await self._drained.wait()
            if self._listener is not None:
                await self._listener.stop()
                self._listener = None
            if self._pool is not None:
                await self._pool.close()
                self._pool = None
        self.signals.release_all()

    def _connection_kwargs(self) -> dict[str, Any]:
        return {
            **self._session_kwargs,
            "autocommit": True,
            "prepare_threshold": 0,
            "row_factory": dict_row,
        }

    @staticmethod
    async def _configure(conn: Conn) -> None:
        # orjson for jsonb values: same parser as every other JSON read here.
        # Leniently: a value another writer stored too deep to decode becomes an
        # UndecodableJSON in its row instead of failing the whole read.
        set_json_loads(_json.loads_column, conn)

    async def _open_session(self) -> Conn:
        try:
            conn = await psycopg.AsyncConnection.connect(self._dsn, **self._connection_kwargs())
        except psycopg.OperationalError as exc:
            raise self._unavailable(exc) from exc
        await self._configure(conn)
        return conn

    def _unavailable(self, exc: BaseException) -> StoreUnavailable:
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        detail = redact_dsn(detail, source=self._dsn)
        return StoreUnavailable(f"Postgres at {self.target} is unavailable: {detail}")

    async def _create_schema(self, conn: Conn) -> None:
        exists = await conn.execute(
            "select 1 from pg_catalog.pg_namespace where nspname = %(schema)s",
            {"schema": self._schema},
        )
        if await exists.fetchone() is None:
            await _create_if_missing(conn, f'create schema if not exists "{self._schema}"')

    async def _guard_schema(self, conn: Conn) -> None:
        """The schema guard's decision table (docs/protocol-notes.md, Postgres)."""
        rows = await (await conn.execute(_sql("installations"))).fetchall()
        current = rows[0]["current_schema"] if rows else None
        found = [r["schema"] for r in rows if r["schema"] is not None]
        if self._schema is not None:
            if current != self._schema:
                raise SchemaMismatch(
                    f"schema {self._schema!r} is not the current schema of {self.target} "
                    f"(current_schema() = {current!r}); does it exist and is it on the "
                    "search path?"
                )
            return
        if current is None or not found or current in found:
            return
        raise SchemaMismatch(
            f"{self.target} has cairnq tables in schema(s) {', '.join(found)} but the "
            f"session's current schema is {current!r}; pass schema= to pick one"
        )

    async def _check_schema(self, conn: Conn) -> bool:
        """``_schema_check.verify`` on the current schema; True if the full check ran."""
        catalog = await schema_check.read_postgres(conn)
        names = [name for name, _ in migrations("postgres")]
        return schema_check.verify(catalog, "postgres", names, self.target)

    async def _apply_migrations(self, conn: Conn) -> None:
        """§1.4: one transaction per migration under an exclusive ledger lock."""
        await _create_if_missing(conn, _CREATE_LEDGER)
        for name, script in migrations("postgres"):
            async with conn.transaction():
                await conn.execute(_LOCK_LEDGER)
                seen = await (await conn.execute(_LEDGER_HAS, {"name": name})).fetchone()
                if seen is not None:
                    continue
                # Multi-statement DDL needs the simple query protocol, which the
                # client-side-binding cursor uses.
                async with psycopg.AsyncClientCursor(conn) as cur:
                    await cur.execute(script)
                await conn.execute(_LEDGER_ADD, {"name": name})

    @staticmethod
    async def _read_protocol_version(conn: Conn) -> int:
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

    # -- running operations ----------------------------------------------------------

    async def _run(
        self, work: Callable[[Conn], Awaitable[T]], *, write: bool, retry: bool = False
    ) -> T:
        """Run ``work`` on a pooled connection; connection loss -> StoreUnavailable.

        ``retry`` (reads only): one more try on a fresh connection when the first
        one turns out dead, as after a server restart or a terminated backend.
        """
        await self._admit(write)
        self._inflight += 1
        try:
            with self._faults():
                return await self._on_connection(work, retry=retry, own_ok=not write)
        finally:
            self._done_one()

    @contextlib.contextmanager
    def _faults(self) -> Iterator[None]:
        """Storage faults raised inside as engine errors (``_faults.postgres_fault``)."""
        try:
            yield
        except psycopg.Error as exc:
            fault = postgres_fault(exc, self.target)
            if fault is None:
                raise
            raise fault from exc

    def _check_writable(self, what: str) -> None:
        if self._read_only:
            raise StoreUnavailable(
                f"store {self.target} was opened read_only=True; {what} writes refused"
            )

    async def _admit(self, write: bool) -> None:
        """Refuse writes on a read-only store; connect; refuse after close."""
        if write and self._read_only:
            raise StoreUnavailable(f"store {self.target} was opened read_only=True; writes refused")
        if self._pool is None:
            await self.connect()
        if self._closed or self._pool is None:
            raise StoreClosed(f"store {self.target} is closed")

    def _done_one(self) -> None:
        self._inflight -= 1
        if self._inflight == 0 and self._drained is not None:
            self._drained.set()

    async def _on_connection(
        self, work: Callable[[Conn], Awaitable[T]], *, retry: bool = False, own_ok: bool = False
    ) -> T:
        """``work`` on a pooled connection (``_run`` without admission or counting).

        ``own_ok`` (reads): with ``read_own_connection_after_s`` set, a read that
        gets no pooled connection in that time runs on one of its own.
        """
        pool = self._pool
        if pool is None:
            raise StoreClosed(f"store {self.target} is closed")
        wait: float | None = None
        if own_ok and self._own_after_s is not None:
            recovering = time.monotonic() < self._pool_recovering_until
            wait = 0.001 if recovering else self._own_after_s
        retried = discarded = 0
        while True:
            # getconn/putconn rather than ``pool.connection()``: that context
            # also enters the connection's own context, whose exit commits;
            # on these autocommit connections there is never anything to
            # commit (every transaction here is closed by its own block, and
            # putconn rolls back one left open), so it only cost time per call.
            try:
                conn = await pool.getconn(timeout=wait)
            except PoolTimeout as exc:
                if wait is None:
                    raise self._unavailable(exc) from exc
                return await self._on_own_connection(work)
            try:
                if terminated(conn):
                    # Never used, so safe to skip even for writes; the pool
                    # replaces a closed connection by itself.
                    await conn.close()
                    discarded += 1
                    if discarded <= self._max_size:
                        continue
                    raise psycopg.OperationalError("every pooled connection was dead")
                try:
                    return await work(conn)
                except psycopg.OperationalError as exc:
                    if not (conn.broken or conn.closed):
                        raise
                    lost: BaseException = exc
            finally:
                await pool.putconn(conn)
            if not retry or retried:
                raise self._unavailable(lost) from lost
            retried += 1

    async def _on_own_connection(self, work: Callable[[Conn], Awaitable[T]]) -> T:
        """A read the pool could not serve in time, on a connection of its own."""
        self._pool_recovering_until = time.monotonic() + _RECOVERING_S
        conn = await self._open_session()  # StoreUnavailable while the server is away
        try:
            result = await work(conn)
        except psycopg.OperationalError as exc:
            if not (conn.broken or conn.closed):
                raise
            raise self._unavailable(exc) from exc
        finally:
            await conn.close()
        return result

    async def _grouped(
        self, name: str | None, params: Mapping[str, Any], order: str
    ) -> Task | None:
        """A single-row write through the group commit (``_pg_group``); None = insert."""
        await self._admit(True)
        self._inflight += 1
        try:
            with self._faults():
                if name is None:
                    row = await self._group.insert(params)
                else:
                    row = await self._group.write(_sql(name), params, order)
        finally:
            self._done_one()
        return None if row is None else self._task(row)

    def _task(self, row: Mapping[str, Any]) -> Task:
        return self._task_from_row(row, decoded_json=self._json_decoded)

    async def _one(
        self, name: str, params: Mapping[str, Any], *, write: bool, retry: bool = False
    ) -> Task | None:
        """One statement returning at most one task row."""
        sql = _sql(name)
        if not self._positional:

            async def by_name(conn: Conn) -> dict[str, Any] | None:
                return await (await conn.execute(sql, params)).fetchone()

            row = await self._run(by_name, write=write, retry=retry)
            return None if row is None else self._task(row)

        async def work(conn: Conn) -> Task | None:
            cur = conn.cursor(row_factory=self._task_rows)
            return await (await cur.execute(sql, params)).fetchone()

        return await self._run(work, write=write, retry=retry)

    def _task_rows(self, cursor: Any) -> Callable[[Sequence[Any]], Task]:
        """A row factory building ``Task``s by position (``_positional`` tables only).

        Skips the dict per row and the reordering ``_task_from_row`` does.
        """
        decoded, width = self._json_decoded, len(ROW_COLUMNS)
        return lambda values: task_from_values(values[:width], decoded_json=decoded)

    # -- reads the Inspector and protocol checks make ------------------------------

    async def protocol_version(self) -> int:
        """The database's ``protocol_version`` (0 when missing)."""
        if self._pool is None:
            await self.connect()
        return await self._run(self._read_protocol_version, write=False, retry=True)

    async def read_statement(
        self, name: str, params: Mapping[str, Any]
    ) -> builtins.list[dict[str, Any]]:
        """Run a read-only statement by name; rows as dicts (JSON decoded).

        Raises:
            ValueError: ``name`` is not a read-only statement of this dialect.
        """
        self._read_statement_text(name)
        active = frozenset(k for k, v in params.items() if v is not None)
        return await self._fetch_all(name, params, active=active, jit=name not in WITHOUT_JIT)
