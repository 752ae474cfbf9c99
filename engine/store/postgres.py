"""The Postgres store: psycopg 3 (async) with psycopg-pool, database clock, jsonb.

Every operation is one named statement from ``sql/postgres`` on a pooled
autocommit connection, or one explicit transaction (keyed submits, ``*_by_key``,
claim sessions, transactional completion). Plain submits and the owned
single-row writes (heartbeat, progress, succeed, complete, fail) go through a
group commit (``_pg_group``): those arriving together share one pipelined
transaction (their inserts one multi-row statement), each caller answered
after its COMMIT. Statements are prepared
server-side on first use (``prepare_threshold=0``): the set of texts is small
and fixed. Those with optional filters run unprepared, each call planned with
its values (``_pg_statements.PLANNED_WITH_VALUES``); no text is edited at run
time.

Connecting follows docs/protocol-notes.md, Postgres (``_pg_schema``: schema
guard, catalog check, migrations, protocol version, JSON wire form), then opens
the pool and the LISTEN connection (``_pg_commits``) in the background.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import math
import time
import weakref
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import dict_row
from psycopg.types.json import set_json_loads
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from engine import _json, _rules
from engine._errors import (
    StoreClosed,
    StoreUnavailable,
)
from engine._models import Task
from engine._redaction import redact_dsn
from engine.store import _pg_schema as pg_schema
from engine.store._base import (
    ROW_COLUMNS,
    StoreCapabilities,
    task_from_values,
)
from engine.store._faults import postgres_fault
from engine.store._pg_commits import CommitWatch
from engine.store._pg_group import GroupCommit
from engine.store._pg_operations import PostgresOperations
from engine.store._pg_pool import most_recent_first, terminated
from engine.store._pg_statements import WITHOUT_JIT, _sql

T = TypeVar("T")
Conn = psycopg.AsyncConnection[dict[str, Any]]

#: After the pool kept a read waiting (``read_own_connection_after_s``), reads skip
#: the wait for a pooled connection this long: the pool is reconnecting.
_RECOVERING_S = 5.0


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
    capabilities = StoreCapabilities(
        completing_claim=True, single_draw_commits=True, signalled_claims_skip_probe=True
    )

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
        name_rule = pg_schema.SCHEMA_NAME
        if schema is not None and (not isinstance(schema, str) or not name_rule.match(schema)):
            raise ValueError(f"schema must match {name_rule.pattern}, got {schema!r}")
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
        self._listener: CommitWatch | None = None
        self._json_decoded = True
        # The table's columns start with the protocol's, in its order (read on
        # connect): task rows may then be decoded by position.
        self._positional = False
        self._closed = False
        self._connect_lock = asyncio.Lock()
        self._inflight = 0
        self._drained: asyncio.Event | None = None
        self._group = GroupCommit(self._on_connection, _sql("insert_task"), _sql("insert_tasks"))

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
                opened = await pg_schema.prepare(
                    conn,
                    schema=self._schema,
                    read_only=self._read_only,
                    migrate=self._migrate,
                    target=self.target,
                )
                self._json_decoded = opened.json_decoded
                self._positional = opened.positional
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
            self._listener = CommitWatch(self._dsn, listener_kwargs, self.signals)
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

    async def _configure(self, conn: Conn) -> None:
        # orjson for jsonb values: same parser as every other JSON read here.
        # Leniently: a value another writer stored too deep to decode becomes an
        # UndecodableJSON in its row instead of failing the whole read.
        set_json_loads(_json.loads_column, conn)
        # Its commits are signalled in-process: the listener drops their echoes.
        ref = weakref.ref(conn)
        self.signals.add_own_writer(
            conn.info.backend_pid, lambda: (c := ref()) is not None and not c.closed
        )

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

    def _task_cursor(self, conn: Conn) -> Any:
        return conn.cursor(row_factory=self._task_rows) if self._positional else None

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
        return await self._run(pg_schema.read_protocol_version, write=False, retry=True)

    async def read_statement(
        self, name: str, params: Mapping[str, Any], *, background: bool = False
    ) -> builtins.list[dict[str, Any]]:
        """Run a read-only statement by name; rows as dicts (JSON decoded).

        Raises:
            ValueError: ``name`` is not a read-only statement of this dialect.
        """
        self._read_statement_text(name)
        return await self._fetch_all(name, params, jit=name not in WITHOUT_JIT)
