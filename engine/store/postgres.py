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

Connecting follows docs/protocol-notes.md, Postgres (``_pg_schema``: schema
guard, catalog check, migrations, protocol version, JSON wire form), then opens
the pool and the LISTEN connection (``_pg_commits``) in the background.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import math
import select
from collections import deque
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import dict_row
from psycopg.types.json import set_json_loads
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from engine import _json, _rules
from engine._errors import (
    AlreadyExists,
    LostLease,
    StoreClosed,
    StoreUnavailable,
)
from engine._models import LIVE_STATUSES, Task, TaskRef, in_claim_order
from engine._redaction import redact_dsn
from engine._sql import specialise, statement, to_pyformat
from engine.store import _pg_schema as pg_schema
from engine.store._base import (
    LEASE_EXPIRED_JSON,
    ROW_COLUMNS,
    CompletingClaim,
    NewTask,
    Plan,
    StoreCapabilities,
    TaskStore,
    screen_plan,
    task_from_values,
)
from engine.store._faults import postgres_fault
from engine.store._pg_commits import CommitWatch
from engine.store._pg_group import GroupCommit, lost

T = TypeVar("T")
Conn = psycopg.AsyncConnection[dict[str, Any]]

# Transaction control for pipelines that commit before their last result is read.
_BEGIN = "begin isolation level read committed"
_COMMIT = "commit"
_ROLLBACK = "rollback"


def _sql(name: str, active: frozenset[str] | None = None) -> str:
    text = statement("postgres", name)
    if active is not None:
        text = specialise(text, active)
    return to_pyformat(text)


class PostgresStore(TaskStore):
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

    Raises:
        ValueError: malformed DSN, bad schema name or pool sizes.
    """

    text_refuses_nul = True

    dialect = "postgres"
    capabilities = StoreCapabilities(completing_claim=True)

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
    ) -> None:
        _rules.text(dsn, "dsn")
        _rules.integer(min_size, "min_size", minimum=0)
        _rules.integer(max_size, "max_size", minimum=max(1, min_size))
        if schema is not None and (
            not isinstance(schema, str) or not pg_schema.SCHEMA_NAME.match(schema)
        ):
            raise ValueError(f"schema must match {pg_schema.SCHEMA_NAME.pattern}, got {schema!r}")
        if not connect_timeout_s > 0:
            raise ValueError("connect_timeout_s must be > 0")
        try:
            params = conninfo_to_dict(dsn)
        except psycopg.ProgrammingError as exc:
            raise ValueError(f"malformed Postgres DSN {redact_dsn(dsn)!r}: {exc}") from exc
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
            _most_recent_first(pool)
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
                return await self._on_connection(work, retry=retry)
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
        self, work: Callable[[Conn], Awaitable[T]], *, retry: bool = False
    ) -> T:
        """``work`` on a pooled connection (``_run`` without admission or counting)."""
        pool = self._pool
        if pool is None:
            raise StoreClosed(f"store {self.target} is closed")
        retried = discarded = 0
        while True:
            # getconn/putconn rather than ``pool.connection()``: that context
            # also enters the connection's own context, whose exit commits;
            # on these autocommit connections there is never anything to
            # commit (every transaction here is closed by its own block, and
            # putconn rolls back one left open), so it only cost time per call.
            try:
                conn = await pool.getconn()
            except PoolTimeout as exc:
                raise self._unavailable(exc) from exc
            try:
                if _terminated(conn):
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
        return self.task_from_row(row, decoded_json=self._json_decoded)

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

        Skips the dict per row and the reordering ``task_from_row`` does.
        """
        decoded, width = self._json_decoded, len(ROW_COLUMNS)
        return lambda values: task_from_values(values[:width], decoded_json=decoded)

    async def _owned(self, name: str, task_id: str, params: Mapping[str, Any]) -> Task:
        """An ownership-checked write (group-committed): the row, or LostLease."""
        task = await self._grouped(name, {"id": task_id, **params}, task_id)
        if task is None:
            raise LostLease(task_id)
        return task

    # -- submit --------------------------------------------------------------------

    def _insert_params(self, new: NewTask) -> dict[str, Any]:
        return {
            "id": new.id,
            "name": new.name,
            "queue": new.queue,
            "payload": new.payload_json,
            "metadata": new.metadata_json,
            "max_attempts": new.max_attempts,
            "priority": new.priority,
            "parent_id": new.parent_id,
            "root_id": new.root_id,
            "correlation_id": new.correlation_id,
            "delay_ms": new.delay_ms,
        }

    async def _submit(self, new: NewTask) -> Task:
        params = self._insert_params(new)
        if new.key is None:
            task = await self._grouped(None, params, new.id)
            assert task is not None  # insert ... returning always yields the row
            return task
        key = new.key

        async def keyed(conn: Conn) -> tuple[Task, Task | None]:
            canceling = None
            # Pipelined: BEGIN, lock_key and the lookup go out in one round trip,
            # the writes and COMMIT in a second.
            async with conn.pipeline(), conn.transaction():
                await conn.execute(_sql("lock_key"), {"key": key})
                # get_key + get in one statement: a pointer to a purged task
                # reads as no row, i.e. a free key (§4.3 step 5).
                row = await (await conn.execute(_sql("get_by_key"), {"key": key})).fetchone()
                if row is not None:
                    existing = self._task(row)
                    if new.conflict == "reject":
                        raise AlreadyExists(key)
                    live = existing.status in LIVE_STATUSES
                    if live and new.conflict in ("reuse", "reuse-succeeded"):
                        return existing, None
                    if existing.status == "succeeded" and new.conflict == "reuse-succeeded":
                        return existing, None
                    if live:
                        canceling = await conn.execute(_sql("cancel"), {"id": existing.id})
                inserting = await conn.execute(_sql("insert_task"), params)
                await conn.execute(_sql("upsert_key"), {"key": key, "task_id": new.id})
            inserted = await inserting.fetchone()
            assert inserted is not None  # insert ... returning always yields the row
            canceled = None if canceling is None else await canceling.fetchone()
            return self._task(inserted), None if canceled is None else self._task(canceled)

        submitted, replaced = await self._run(keyed, write=True)
        self._after_write(replaced)
        return submitted

    # -- reads ---------------------------------------------------------------------

    async def _get(self, task_id: str) -> Task | None:
        return await self._one("get", {"id": task_id}, write=False, retry=True)

    async def _get_by_key(self, key: str) -> Task | None:
        return await self._one("get_by_key", {"key": key}, write=False, retry=True)

    async def _ref(self, name: str, params: Mapping[str, Any]) -> TaskRef | None:
        async def work(conn: Conn) -> dict[str, Any] | None:
            return await (await conn.execute(_sql(name), params)).fetchone()

        row = await self._run(work, write=False, retry=True)
        return None if row is None else TaskRef(row["id"], row["status"])

    async def _get_status(self, task_id: str) -> TaskRef | None:
        return await self._ref("get_status", {"id": task_id})

    async def _get_status_by_key(self, key: str) -> TaskRef | None:
        return await self._ref("get_status_by_key", {"key": key})

    async def _fetch_all(
        self, name: str, params: Mapping[str, Any], *, active: frozenset[str] | None = None
    ) -> builtins.list[dict[str, Any]]:
        async def work(conn: Conn) -> builtins.list[dict[str, Any]]:
            return await (await conn.execute(_sql(name, active), params)).fetchall()

        return await self._run(work, write=False, retry=True)

    async def _list(
        self, filters: dict[str, str | None], limit: int, offset: int
    ) -> builtins.list[Task]:
        active = frozenset(k for k, v in filters.items() if v is not None)
        rows = await self._fetch_all(
            "list", {**filters, "limit": limit, "offset": offset}, active=active
        )
        return [self._task(r) for r in rows]

    async def _stats(self, queue: str | None) -> builtins.list[tuple[str, str, int]]:
        active = frozenset({"queue"}) if queue is not None else frozenset()
        rows = await self._fetch_all("stats", {"queue": queue}, active=active)
        return [(r["queue"], r["status"], int(r["count"])) for r in rows]

    async def _queue_depth(self, queue: str, max_depth: int) -> int:
        rows = await self._fetch_all("queue_depth", {"queue": queue, "max_depth": max_depth})
        return int(rows[0]["headroom"])

    async def protocol_version(self) -> int:
        """The database's ``protocol_version`` (0 when missing)."""
        if self._pool is None:
            await self.connect()
        return await self._run(pg_schema.read_protocol_version, write=False, retry=True)

    async def read_statement(
        self, name: str, params: Mapping[str, Any]
    ) -> builtins.list[dict[str, Any]]:
        """Run a read-only statement by name; rows as dicts (JSON decoded).

        Raises:
            ValueError: ``name`` is not a read-only statement of this dialect.
        """
        self.read_statement_text(name)
        active = frozenset(k for k, v in params.items() if v is not None)
        return await self._fetch_all(name, params, active=active)

    # -- cancel / retry / purge ---------------------------------------------------------

    async def _cancel(self, task_id: str) -> Task | None:
        return await self._one("cancel", {"id": task_id}, write=True)

    async def _retry(self, task_id: str, reset_attempt: bool) -> Task | None:
        return await self._one("retry", {"id": task_id, "reset_attempt": reset_attempt}, write=True)

    async def _reschedule(
        self, statement: str, task_id: str, params: dict[str, Any]
    ) -> Task | None:
        return await self._one(statement, {"id": task_id, **params}, write=True)

    async def _by_key(self, key: str, name: str, params: Mapping[str, Any]) -> Task | None:
        """lock_key, get_key, then ``name`` on the task the key points at."""

        async def work(conn: Conn) -> Task | None:
            async with conn.pipeline(), conn.transaction():
                await conn.execute(_sql("lock_key"), {"key": key})
                pointer = await (await conn.execute(_sql("get_key"), {"key": key})).fetchone()
                if pointer is None:
                    return None
                cur = await conn.execute(_sql(name), {"id": pointer["task_id"], **params})
            row = await cur.fetchone()
            return None if row is None else self._task(row)

        return await self._run(work, write=True)

    async def _cancel_by_key(self, key: str) -> Task | None:
        return await self._by_key(key, "cancel", {})

    async def _retry_by_key(self, key: str, reset_attempt: bool) -> Task | None:
        return await self._by_key(key, "retry", {"reset_attempt": reset_attempt})

    async def _purge(
        self, older_than_ms: int, filters: dict[str, str | None], limit: int
    ) -> builtins.list[str]:
        active = frozenset(k for k, v in filters.items() if v is not None)
        params = {**filters, "older_than_ms": older_than_ms, "limit": limit}

        async def work(conn: Conn) -> builtins.list[dict[str, Any]]:
            return await (await conn.execute(_sql("purge", active), params)).fetchall()

        rows = await self._run(work, write=True)
        return [r["id"] for r in rows]

    # -- claims ----------------------------------------------------------------------

    def _draw_statement(
        self,
        queues: builtins.list[str],
        worker_id: str,
        lease_ms: int,
        draw_names: Any,
        limit: int,
    ) -> tuple[str, dict[str, Any]] | None:
        """The claim variant (§4.13) and its parameters for one draw; None = no statement."""
        variant = self.draw_variant(queues, draw_names, limit)
        if variant is None:
            return None
        name, params = variant
        params.update(worker_id=worker_id, lease_ms=lease_ms)
        return _sql(name), params

    async def _claim_session(
        self,
        queues: builtins.list[str],
        worker_id: str,
        lease_ms: int,
        names: builtins.list[str] | None,
        plan: Plan[T],
    ) -> T | None:
        async def draw(conn: Conn, draw_names: Any, limit: int) -> builtins.list[Task]:
            stmt = self._draw_statement(queues, worker_id, lease_ms, draw_names, limit)
            if stmt is None:
                return []
            rows = await (await conn.execute(*stmt)).fetchall()
            return in_claim_order(self._task(r) for r in rows)

        async def session(conn: Conn) -> tuple[bool, T | None, builtins.list[Task]]:
            if not await self._probe(conn, queues, names):
                return False, None, []
            # Pipelined: BEGIN and recovery travel with the first draw; the
            # recovered rows are read once the transaction is over.
            async with conn.pipeline(), conn.transaction():
                recovering = await conn.execute(
                    _sql("recover_leases"), {"lease_expired_error": LEASE_EXPIRED_JSON}
                )
                value = await plan(lambda n, limit: draw(conn, n, limit))
            recovered = [self._task(r) for r in await recovering.fetchall()]
            return True, value, recovered

        ran, value, recovered = await self._run(session, write=True)
        for task in recovered:
            self._after_write(task)
        return value if ran else None

    @staticmethod
    async def _probe(
        conn: Conn, queues: builtins.list[str], names: builtins.list[str] | None
    ) -> bool:
        cur = await conn.execute(_sql("claimable_probe"), {"queues": queues, "names": names})
        probe = await cur.fetchone()
        return probe is not None and bool(probe["has_work"])

    async def claim_session_completing(
        self,
        *,
        complete_ids: Sequence[str],
        queues: Sequence[str],
        worker_id: str,
        lease_ms: int = 30_000,
        names: Sequence[str] | None,
        plan: Plan[T],
        single_draw: bool = False,
    ) -> CompletingClaim[T]:
        """``complete_many(complete_ids)`` and a claim session, sharing one COMMIT.

        The worker's path when the calls it is settling are what frees the
        slots the claim fills: the probe runs first, outside any transaction
        (§4.14 step 1); if it finds work, one transaction completes the given
        tasks (each ownership-checked, cancel wins, as ``complete_many``), then
        recovers expired leases and runs ``plan`` exactly as ``claim_session``,
        and commits. Completions and claims become durable together, so the
        worker never holds more leases than its slots. If the probe finds
        nothing, the completions are written alone.

        With ``single_draw`` the plan promises at most one draw: its COMMIT then
        travels with that draw's statement (one round trip for the whole
        transaction). A second draw raises ``RuntimeError``.

        Failure isolation: if the shared transaction fails for any reason but
        connection loss (a claim statement error, a raising plan), it is rolled
        back as a whole, the completions are written alone, and the claim's
        error is returned in ``claim_error``, so completing never fails because
        of the claim. Connection loss raises ``StoreUnavailable`` (whether the
        COMMIT landed is unknown, exactly as for a lone write).

        Returns:
            ``settled`` (ids completed; a missing id lost its lease), ``value``
            (the plan's value; None when the probe found nothing or the claim
            failed) and ``claim_error``.

        Raises:
            ValueError: malformed ids, queues or names.
            StoreUnavailable: the connection was lost.
        """
        ids = _rules.text_list(complete_ids, "complete_ids", refuses_nul=True)
        args = self.check_claim(queues, worker_id, lease_ms, names)
        queue_list, worker_id, lease_ms, name_list = (
            args.queues,
            args.worker_id,
            args.lease_ms,
            args.names,
        )
        complete_params = {"ids": ids, "worker_id": worker_id}
        # A single draw's COMMIT travels with it: no second draw to top up with.
        plan, set_aside = screen_plan(plan, top_up=not single_draw)

        async def complete_alone(conn: Conn) -> set[str]:
            if not ids:
                return set()
            rows = await (await conn.execute(_sql("complete_many"), complete_params)).fetchall()
            return {r["id"] for r in rows}

        async def session(conn: Conn) -> CompletingClaim[T]:
            if name_list == [] or not await self._probe(conn, queue_list, name_list):
                return CompletingClaim(await complete_alone(conn), None, None)
            committed = confirmed = False
            completing = recovering = None
            try:
                async with conn.pipeline():
                    await conn.execute(_BEGIN)
                    if ids:
                        completing = await conn.execute(_sql("complete_many"), complete_params)
                    recovering = await conn.execute(
                        _sql("recover_leases"), {"lease_expired_error": LEASE_EXPIRED_JSON}
                    )

                    async def draw(draw_names: Any, limit: int) -> builtins.list[Task]:
                        nonlocal committed, confirmed
                        if committed:
                            raise RuntimeError("a single_draw plan drew more than once")
                        stmt = self._draw_statement(
                            queue_list, worker_id, lease_ms, draw_names, limit
                        )
                        if stmt is None:
                            return []
                        cur = await conn.execute(*stmt)
                        if single_draw:
                            await conn.execute(_COMMIT)
                            committed = True
                        rows = await cur.fetchall()  # syncs: the COMMIT's outcome too
                        confirmed = committed
                        return in_claim_order(self._task(r) for r in rows)

                    value = await plan(draw)
                    if not committed:
                        await conn.execute(_COMMIT)
                        committed = True
                confirmed = True
            except Exception as exc:
                if lost(conn, exc):
                    raise
                if not confirmed:
                    # Nothing of the transaction was committed: close it and
                    # write the completions on their own.
                    await _abort(conn)
                    return CompletingClaim(await complete_alone(conn), None, exc)
                # Committed, then the plan raised: the completions are durable;
                # the claimed rows go back through lease recovery.
                claim_error: Exception | None = exc
                value = None
            else:
                claim_error = None
            settled = (
                set() if completing is None else {r["id"] for r in await completing.fetchall()}
            )
            recovered = [] if recovering is None else await recovering.fetchall()
            return CompletingClaim(settled, value, claim_error, [self._task(r) for r in recovered])

        try:
            outcome = await self._run(session, write=True)
        finally:
            await self._fail_undecodable(set_aside)
        for task in outcome.recovered:
            self._after_write(task)
        for task_id in outcome.settled:
            self.signals.done(task_id)  # complete only ever ends a task
        return outcome

    # -- owned writes ------------------------------------------------------------------

    async def _heartbeat(self, task_id: str, worker_id: str, lease_ms: int) -> Task:
        return await self._owned(
            "heartbeat", task_id, {"worker_id": worker_id, "lease_ms": lease_ms}
        )

    async def _heartbeat_batch(
        self, task_ids: builtins.list[str], worker_id: str, lease_ms: int
    ) -> dict[str, bool]:
        params = {"ids": task_ids, "worker_id": worker_id, "lease_ms": lease_ms}

        async def work(conn: Conn) -> builtins.list[dict[str, Any]]:
            return await (await conn.execute(_sql("heartbeat_batch"), params)).fetchall()

        rows = await self._run(work, write=True)
        return {r["id"]: r["cancel_requested_at_ms"] is not None for r in rows}

    async def _progress(
        self, task_id: str, worker_id: str, progress: float | None, message: str | None
    ) -> Task:
        params = {"worker_id": worker_id, "progress": progress, "message": message}
        return await self._owned("progress", task_id, params)

    async def _succeed(self, task_id: str, worker_id: str, result_json: str | None) -> Task:
        return await self._owned("succeed", task_id, self._result_params(worker_id, result_json))

    async def _complete(self, task_id: str, worker_id: str, result_json: str | None) -> Task:
        return await self._owned("complete", task_id, self._result_params(worker_id, result_json))

    async def _complete_many(self, task_ids: builtins.list[str], worker_id: str) -> set[str]:
        params = {"ids": task_ids, "worker_id": worker_id}

        async def work(conn: Conn) -> builtins.list[dict[str, Any]]:
            return await (await conn.execute(_sql("complete_many"), params)).fetchall()

        return {row["id"] for row in await self._run(work, write=True)}

    @staticmethod
    def _result_params(worker_id: str, result_json: str | None) -> dict[str, Any]:
        return {
            "worker_id": worker_id,
            "result": result_json,
            "message": None,
        }

    async def _fail(
        self, task_id: str, worker_id: str, error_json: str, retryable: bool, delay_ms: int
    ) -> Task:
        # Recording a failure must not itself fail (§2.6): a NUL jsonb would
        # refuse is replaced rather than rejected.
        safe_error = _rules.NUL_ESCAPE.sub(lambda m: m.group(0)[:-6] + "\\ufffd", error_json)
        return await self._owned(
            "fail",
            task_id,
            {
                "worker_id": worker_id,
                "error": safe_error,
                "retryable": retryable,
                "delay_ms": delay_ms,
            },
        )

    # -- transactional completion ---------------------------------------------------------

    async def _owned_in(
        self,
        name: str,
        task_id: str,
        worker_id: str,
        result: Any,
        write: Callable[[Any], Awaitable[Any]],
    ) -> Task:
        task_id, worker_id = self._owned_ids(task_id, worker_id)
        params = {"id": task_id, **self._result_params(worker_id, self._result_json(result))}

        async def work(conn: Conn) -> Task:
            async with conn.transaction():
                # The caller's write first, then the settle: if the lease is gone
                # the whole transaction, the caller's write included, rolls back.
                value = await write(conn)
                settle = params
                if result is None and value is not None:
                    # As in cairnq's succeed_in: what write returns is the result.
                    encoded = self._result_json(value)
                    settle = {"id": task_id, **self._result_params(worker_id, encoded)}
                row = await (await conn.execute(_sql(name), settle)).fetchone()
                if row is None:
                    raise LostLease(task_id)
            return self._task(row)

        task = await self._run(work, write=True)
        self._after_write(task)
        return task


class _MostRecentFirst(deque[Conn]):
    """A pool's idle list that hands out the most recently returned connection.

    psycopg-pool takes idle connections from the left and returns them on the
    right, so sequential operations rotate through every pooled connection and
    each one prepares and plans every statement for itself. Returned on the left,
    the warm connection is reused and the others stay idle until ``max_idle``
    retires them (measured: purge batches ~45k -> ~65k rows/s with 10 pooled).
    """

    def append(self, conn: Conn) -> None:
        self.appendleft(conn)


def _most_recent_first(pool: AsyncConnectionPool[Conn]) -> None:
    # A private attribute of psycopg-pool: only replaced when it is the plain
    # deque this was written against, so a changed pool merely loses the tweak.
    idle = getattr(pool, "_pool", None)
    if type(idle) is deque:
        pool._pool = _MostRecentFirst(idle)


async def _abort(conn: Conn) -> None:
    """Roll back whatever transaction a failed pipeline left open (if any)."""
    if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        await conn.execute(_ROLLBACK)


def _terminated(conn: Conn) -> bool:
    """True if an idle pooled connection was most likely terminated.

    A backend killed by a restart or ``pg_terminate_backend`` sends its FATAL
    notice and closes the socket; an idle connection has nothing else to read,
    so a zero-timeout ``select`` tells without a round trip.
    """
    if conn.closed or conn.broken:
        return True
    readable, _, _ = select.select([conn.pgconn.socket], [], [], 0)
    return bool(readable)
