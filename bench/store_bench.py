"""Store benchmark: the same workload through the engine and through cairnq 0.15.1.

Run from the repository root::

    python bench/store_bench.py [--dialect sqlite|postgres|both] [--n N]
                                [--synchronous full|normal] [--wal-submits N]

Each side gets its own fresh database (on SQLite: its own new file) and the
rows run in one process. Each row runs in ``ROUNDS`` slices per side, the
sides taking turns and the first side rotating per slice, so neither always
gets the warmer cache and a burst of load from other work falls on every side.
Both sides are driven through their store-level API (what workers use), so the
figures compare storage paths, not client wrappers. Output: one table per
dialect, headed by the durability each side ran with (on SQLite cairnq runs its
default, ``synchronous=FULL``; the engine runs ``--synchronous``, default full
too), one line per row: cairnq and engine operations per second, the ratio
engine/cairnq, the row's *floor* and engine as a share of it. The floor is the
same durable work with no store around it, measured in the same run (SQLite:
a third side taking its turns in the row; see ``sqlite_floor`` and the
``floor_*`` functions; Postgres: ``postgres_floor``, after the rows; ``-``
where a row has none yet). On SQLite a last
line gives each side's WAL size after ``--wal-submits`` (10,000) serial submits.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

CLAIM_LOOP_TASKS = 5_000
#: Each row runs in this many slices per side, the sides taking turns, so a
#: burst of load from other work on the machine falls on every side alike.
ROUNDS = 4
#: Tasks through claim + complete per slice.
CLAIM_SLICE = CLAIM_LOOP_TASKS // ROUNDS
CLAIM_BATCH = 64
GATHER = 64

#: ``open_pair(workdir)`` yields ``{"cairnq": store, "engine": store}``, both connected.
OpenPair = Callable[[Path], contextlib.AbstractAsyncContextManager[dict[str, Any]]]

#: The engine's SQLite durability for this run (``--synchronous``).
SYNCHRONOUS = "full"
#: What each side promises about an acknowledged write, per dialect.
DURABILITY = {
    "sqlite": lambda: (
        "cairnq synchronous=FULL (SDK default), "
        f"engine synchronous={SYNCHRONOUS.upper()}"
        + ("" if SYNCHRONOUS == "full" else " (an OS crash may drop acknowledged commits)")
    ),
    "postgres": lambda: "both sides: the server's synchronous_commit, one WAL flush per COMMIT",
}


@contextlib.asynccontextmanager
async def sqlite_pair(workdir: Path) -> AsyncIterator[dict[str, Any]]:
    """A fresh SQLite file for each side."""
    import cairnq

    from engine import SQLiteStore

    peer = cairnq.CairnQ.sqlite(str(workdir / "cairnq.db"))
    ours = SQLiteStore(workdir / "engine.db", synchronous=SYNCHRONOUS)  # type: ignore[arg-type]
    await peer.connect()
    await ours.connect()
    try:
        yield {"cairnq": peer.store, "engine": ours}
    finally:
        await peer.close()
        await ours.close()


@contextlib.asynccontextmanager
async def postgres_pair(workdir: Path) -> AsyncIterator[dict[str, Any]]:
    """One throwaway schema per side, dropped afterwards.

    The server comes from ``CAIRNQ_TEST_PG_DSN`` (default: the local test server).
    """
    import os
    import uuid

    import cairnq
    import psycopg

    from engine import PostgresStore

    dsn = os.environ.get("CAIRNQ_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
    tag = uuid.uuid4().hex[:8]
    schemas = {"cairnq": f"bench_cairnq_{tag}", "engine": f"bench_engine_{tag}"}
    peer = cairnq.CairnQ.postgres(dsn, schema=schemas["cairnq"])
    ours = PostgresStore(dsn, schema=schemas["engine"])
    try:
        # Both sides create their schema on connect.
        await peer.connect()
        await ours.connect()
        yield {"cairnq": peer.store, "engine": ours}
    finally:
        await peer.close()
        await ours.close()
        with psycopg.connect(dsn, autocommit=True) as conn:
            for schema in schemas.values():
                conn.execute(f'drop schema if exists "{schema}" cascade')


PAIRS: dict[str, OpenPair] = {"sqlite": sqlite_pair, "postgres": postgres_pair}


async def _timed(ops: int, body: Callable[[], Awaitable[None]]) -> float:
    start = time.perf_counter()
    await body()
    return ops / (time.perf_counter() - start)


async def sequential_submit(store: Any, n: int) -> float:
    async def body() -> None:
        for i in range(n):
            await store.submit(name="bench", payload={"i": i})

    return await _timed(n, body)


async def concurrent_submit(store: Any, n: int) -> float:
    async def body() -> None:
        for start in range(0, n, GATHER):
            count = min(GATHER, n - start)
            await asyncio.gather(
                *(store.submit(name="bench", payload={"i": start + j}) for j in range(count))
            )

    return await _timed(n, body)


async def _queued_ids(store: Any, n: int, name: str) -> list[str]:
    ids: list[str] = []
    for start in range(0, n, GATHER):
        count = min(GATHER, n - start)
        tasks = await asyncio.gather(*(store.submit(name=name) for _ in range(count)))
        ids.extend(t.id for t in tasks)
    return ids


async def get(store: Any, n: int) -> float:
    ids = await _queued_ids(store, min(n, 500), "bench.get")

    async def body() -> None:
        for i in range(n):
            await store.get(ids[i % len(ids)])

    return await _timed(n, body)


async def cancel(store: Any, n: int) -> float:
    ids = await _queued_ids(store, n, "bench.cancel")

    async def body() -> None:
        for task_id in ids:
            await store.cancel(task_id)

    return await _timed(n, body)


async def purge(store: Any, n: int) -> float:
    """Rows deleted per second, in purges of 100 (the tasks are canceled first)."""
    for task_id in await _queued_ids(store, n, "bench.purge"):
        await store.cancel(task_id)
    await asyncio.sleep(0.002)  # purge's cutoff is strict: let the clock pass

    async def body() -> None:
        while len(await store.purge(older_than_ms=0, name="bench.purge", limit=100)) == 100:
            pass

    return await _timed(n, body)


async def claim_complete(store: Any, n: int) -> float:
    """Tasks per second through claim(limit=64) + a gather of completes."""
    await _queued_ids(store, CLAIM_SLICE, "bench.claim")

    async def body() -> None:
        done = 0
        while done < CLAIM_SLICE:
            claimed = await store.claim(
                queues=["default"],
                worker_id="worker_bench",
                limit=CLAIM_BATCH,
                names=["bench.claim"],
            )
            if not claimed:
                raise RuntimeError(f"claim came back empty after {done} tasks")
            await asyncio.gather(
                *(
                    store.complete(task_id=t.id, worker_id="worker_bench", result={"ok": 1})
                    for t in claimed
                )
            )
            done += len(claimed)

    return await _timed(CLAIM_SLICE, body)


ROWS: list[tuple[str, Callable[[Any, int], Awaitable[float]]]] = [
    ("sequential submit", sequential_submit),
    (f"{GATHER} concurrent submits (gather)", concurrent_submit),
    ("get", get),
    ("cancel", cancel),
    ("purge (rows/s, limit 100)", purge),
    (f"claim(limit={CLAIM_BATCH}) + complete, {CLAIM_LOOP_TASKS} tasks", claim_complete),
]


#: ``open_floor(workdir)`` yields ``floor(row index, ops)`` -> ops/s for one slice.
OpenFloor = Callable[[Path], contextlib.AbstractAsyncContextManager[Callable[[int, int], float]]]


async def run_dialect(
    dialect: str, n: int, open_floor: OpenFloor | None = None
) -> list[tuple[str, float, float, float | None]]:
    """Every row on each side; ``(row, cairnq ops/s, engine ops/s, floor ops/s)``.

    A row runs in ``ROUNDS`` slices of ``n / ROUNDS`` ops per side (claim:
    ``CLAIM_SLICE`` tasks), on the same stores, the sides taking turns and
    the first side rotating per slice; a side's rate is its ops over its summed
    time. The load from other work on the machine moves from one second to the
    next, so a side that ran its whole row in a quiet or a busy stretch made
    the ratio swing 2x between runs.
    """
    results = []
    per_slice = max(1, n // ROUNDS)
    with tempfile.TemporaryDirectory(prefix=f"store-bench-{dialect}-") as tmp:
        for index, (label, row) in enumerate(ROWS):
            workdir = Path(tmp) / f"row{index}"
            workdir.mkdir()
            spent = {"cairnq": 0.0, "engine": 0.0, "floor": 0.0}
            ops = 0
            async with contextlib.AsyncExitStack() as stack:
                stores = await stack.enter_async_context(PAIRS[dialect](workdir))
                floor = None
                if open_floor is not None:
                    floor = await stack.enter_async_context(open_floor(workdir))
                sides = ["cairnq", "engine"] + ([] if floor is None else ["floor"])
                for turn in range(ROUNDS):
                    count = CLAIM_SLICE if row is claim_complete else per_slice
                    ops += count
                    for side in sides[turn % len(sides) :] + sides[: turn % len(sides)]:
                        if side == "floor":
                            assert floor is not None
                            rate = floor(index, per_slice)
                        else:
                            rate = await row(stores[side], per_slice)
                        spent[side] += count / rate
            bare = None if open_floor is None else ops / spent["floor"]
            results.append((label, ops / spent["cairnq"], ops / spent["engine"], bare))
    return results


# -- floors ---------------------------------------------------------------------------
#
# A row's floor is what this machine allows for the same work with no store
# around it: the engine's own statements (same schema, indexes, migrated by the
# engine), run bare through the stdlib driver, measured in the same run. Each
# floor does the row's durable work the way the row asks for it: one statement
# and one COMMIT per sequential op; one transaction per gather group of 64; the
# purge DELETE as the store sends it, one per call; the claim UPDATE as one
# autocommit statement, then one transaction of 64 completes. (Postgres: see
# postgres_floor.) A store can beat its floor only by doing less durable work
# per op than the row asks for, which the rules forbid.


def _insert_params(task_id: str, i: int, now: int) -> dict[str, Any]:
    return {
        "id": task_id,
        "name": "bench",
        "queue": "default",
        "payload": f'{{"i": {i}}}',
        "metadata": "{}",
        "max_attempts": 3,
        "priority": 0,
        "parent_id": None,
        "root_id": task_id,
        "correlation_id": None,
        "delay_ms": 0,
        "now_ms": now,
    }


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _raw_queued(conn: Any, count: int, name: str) -> list[str]:
    """Setup, not timed: ``count`` queued tasks, one transaction per 64."""
    from engine._ids import new_task_id
    from engine._sql import statement

    insert = statement("sqlite", "insert_task")
    ids = [new_task_id() for _ in range(count)]
    for first in range(0, count, GATHER):
        now = _now_ms()
        conn.execute("begin immediate")
        for i, task_id in enumerate(ids[first : first + GATHER]):
            conn.execute(insert, {**_insert_params(task_id, first + i, now), "name": name})
        conn.execute("commit")
    return ids


def _raw_timed(ops: int, body: Callable[[], None]) -> float:
    start = time.perf_counter()
    body()
    return ops / (time.perf_counter() - start)


def floor_sequential_submit(conn: Any, n: int) -> float:
    """One autocommit ``insert_task`` per op."""
    from engine._ids import new_task_id
    from engine._sql import statement

    insert = statement("sqlite", "insert_task")

    def body() -> None:
        for i in range(n):
            conn.execute(insert, _insert_params(new_task_id(), i, _now_ms()))

    return _raw_timed(n, body)


def floor_concurrent_submit(conn: Any, n: int) -> float:
    """One ``BEGIN IMMEDIATE`` .. ``COMMIT`` of 64 ``insert_task`` per group."""
    from engine._ids import new_task_id
    from engine._sql import statement

    insert = statement("sqlite", "insert_task")

    def body() -> None:
        for first in range(0, n, GATHER):
            now = _now_ms()
            conn.execute("begin immediate")
            for i in range(first, min(first + GATHER, n)):
                conn.execute(insert, _insert_params(new_task_id(), i, now))
            conn.execute("commit")

    return _raw_timed(n, body)


def floor_get(conn: Any, n: int) -> float:
    """One ``get`` per op over 500 ids."""
    from engine._sql import statement

    ids = _raw_queued(conn, min(n, 500), "bench.get")
    sql = statement("sqlite", "get")

    def body() -> None:
        for i in range(n):
            conn.execute(sql, {"id": ids[i % len(ids)]}).fetchall()

    return _raw_timed(n, body)


def floor_cancel(conn: Any, n: int) -> float:
    """One autocommit ``cancel`` per op."""
    from engine._sql import statement

    ids = _raw_queued(conn, n, "bench.cancel")
    sql = statement("sqlite", "cancel")

    def body() -> None:
        for task_id in ids:
            conn.execute(sql, {"id": task_id, "now_ms": _now_ms()}).fetchall()

    return _raw_timed(n, body)


def floor_purge(conn: Any, n: int) -> float:
    """The store's purge DELETE (name filter, limit 100), autocommit, repeated."""
    from engine._sql import statement
    from engine.store._sqlite_operations import purge_statement

    ids = _raw_queued(conn, n, "bench.purge")
    cancel_sql = statement("sqlite", "cancel")
    conn.execute("begin immediate")
    for task_id in ids:
        conn.execute(cancel_sql, {"id": task_id, "now_ms": _now_ms()}).fetchall()
    conn.execute("commit")
    time.sleep(0.002)  # the cutoff is strict
    sql = purge_statement(frozenset({"name"}))

    def body() -> None:
        while True:
            params = {"name": "bench.purge", "queue": None, "status": None, "limit": 100}
            if len(conn.execute(sql, {**params, "before_ms": _now_ms()}).fetchall()) < 100:
                return

    return _raw_timed(len(ids), body)


def floor_claim_complete(conn: Any, n: int) -> float:
    """The claim UPDATE for 64, autocommit, then its 64 ``complete``s in one transaction."""
    from engine._sql import statement

    _raw_queued(conn, CLAIM_SLICE, "bench.claim")
    claim_sql = statement("sqlite", "claim_one_queue_one_name")
    complete_sql = statement("sqlite", "complete")

    def body() -> None:
        done = 0
        while done < CLAIM_SLICE:
            now = _now_ms()
            claim = {"queue": "default", "name": "bench.claim", "worker_id": "w"}
            claim.update(limit=CLAIM_BATCH, now_ms=now, lease_until_ms=now + 30_000)
            claimed = conn.execute(claim_sql, claim).fetchall()
            now = _now_ms()
            conn.execute("begin immediate")
            for row in claimed:
                params = {"id": row[0], "worker_id": "w", "result": '{"ok": 1}', "now_ms": now}
                conn.execute(complete_sql, params).fetchall()
            conn.execute("commit")
            done += len(claimed)

    return _raw_timed(CLAIM_SLICE, body)


#: Each row's SQLite floor, in ROWS order.
SQLITE_FLOORS: list[Callable[[Any, int], float]] = [
    floor_sequential_submit,
    floor_concurrent_submit,
    floor_get,
    floor_cancel,
    floor_purge,
    floor_claim_complete,
]


@contextlib.asynccontextmanager
async def sqlite_floor(workdir: Path) -> AsyncIterator[Callable[[int, int], float]]:
    """The SQLite floor: raw stdlib sqlite3 on a file of its own the engine migrated.

    WAL, the engine's ``synchronous``, one connection in autocommit mode (a
    bare statement is its own transaction, committed, i.e. fsynced under FULL),
    ``foreign_keys`` on as the engine runs (a purge cascades to key rows),
    SQLite's own WAL checkpointing left at its default. Runs on the calling
    thread: nothing else shares it. Yields ``floor(row index, ops)``.
    """
    import sqlite3

    from engine import SQLiteStore

    path = workdir / "floor.db"
    migrated = SQLiteStore(path, synchronous=SYNCHRONOUS)  # type: ignore[arg-type]
    await migrated.connect()
    await migrated.close()
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("pragma journal_mode = wal")
        conn.execute(f"pragma synchronous = {SYNCHRONOUS}")
        conn.execute("pragma foreign_keys = on")
        yield lambda index, ops: SQLITE_FLOORS[index](conn, ops)
    finally:
        conn.close()


async def postgres_floor(n: int) -> dict[str, float]:
    """The engine's own statements, bare: one psycopg call per op, nothing else.

    A sequential submit or cancel that tells its caller the write is durable
    needs at least its statement and a COMMIT (a WAL flush) per op; a get needs
    one round trip. Here the very statements the engine sends (same SQL, same
    table, indexes and trigger, prepared) run on one autocommit connection with
    no store around them, so each store row can be read against what this
    machine allows for it. The batched rows get the cheapest bare form known
    for their work: 64 inserts as one ``insert_tasks`` statement (one
    transaction, one WAL flush); purge as the store's ``purge`` statement,
    limit 100, until empty; claim + complete as one claim statement
    (autocommit) then its 64 ``complete`` statements pipelined in one
    transaction. Throwaway schema, migrated by the engine.
    """
    import os
    import uuid

    import orjson
    import psycopg

    from engine import PostgresStore
    from engine._ids import new_task_id
    from engine.store._base import claim_variant
    from engine.store.postgres import _sql

    dsn = os.environ.get("CAIRNQ_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
    schema = f"bench_floor_{uuid.uuid4().hex[:8]}"
    migrated = PostgresStore(dsn, schema=schema)
    await migrated.connect()
    await migrated.close()
    out: list[tuple[str, float]] = []

    def insert_params(name: str, i: int) -> dict[str, Any]:
        task_id = new_task_id()
        return {
            "id": task_id,
            "name": name,
            "queue": "default",
            "payload": f'{{"i": {i}}}',
            "metadata": "{}",
            "max_attempts": 3,
            "priority": 0,
            "parent_id": None,
            "root_id": task_id,
            "correlation_id": None,
            "delay_ms": 0,
        }

    try:
        async with await psycopg.AsyncConnection.connect(
            dsn, autocommit=True, prepare_threshold=0, options=f"-c search_path={schema}"
        ) as conn:
            ids: list[str] = []
            insert, get_sql, cancel_sql = _sql("insert_task"), _sql("get"), _sql("cancel")
            insert_many = _sql("insert_tasks")

            async def submit() -> None:
                for i in range(n):
                    params = insert_params("bench", i)
                    ids.append(params["id"])
                    await (await conn.execute(insert, params)).fetchone()

            async def submit_64() -> None:
                for start in range(0, n, GATHER):
                    rows = [insert_params("bench.many", start + j) for j in range(GATHER)]
                    text = orjson.dumps(rows).decode()
                    await (await conn.execute(insert_many, {"rows": text})).fetchall()

            async def get() -> None:
                for i in range(n):
                    await (await conn.execute(get_sql, {"id": ids[i % 500]})).fetchone()

            async def cancel() -> None:
                for task_id in ids:
                    await (await conn.execute(cancel_sql, {"id": task_id})).fetchone()

            purge_sql = _sql("purge")  # unprepared, as the store runs it
            purge_params = {
                "queue": None,
                "status": None,
                "name": "bench.purge",
                "older_than_ms": 0,
                "limit": 100,
            }

            async def purge_slice(count: int) -> float:
                """Seconds to purge ``count`` tasks canceled just before, as one row slice.

                In slices like the store's row (its tasks canceled, then purged,
                ROUNDS times on one table), so the statement meets the same
                table: the index entries of the slices purged before (dead
                until vacuum) included. Run once over a table without them, this
                floor read 2-3x the store's rate with the very same statement.
                """
                for start in range(0, count, GATHER):
                    rows = [
                        insert_params("bench.purge", start + j)
                        for j in range(min(GATHER, count - start))
                    ]
                    text = orjson.dumps(rows).decode()
                    for row in await (await conn.execute(insert_many, {"rows": text})).fetchall():
                        await conn.execute(cancel_sql, {"id": row[0]})
                await asyncio.sleep(0.002)  # purge's cutoff is strict: let the clock pass
                began = time.perf_counter()
                while True:
                    cur = await conn.execute(purge_sql, purge_params, prepare=False)
                    if len(await cur.fetchall()) < 100:
                        return time.perf_counter() - began

            variant, claim_params = claim_variant(["default"], ["bench.claim"])
            claim_sql, complete_sql = _sql(variant), _sql("complete")
            claim_params.update(worker_id="worker_bench", lease_ms=30_000, limit=CLAIM_BATCH)

            async def claim_complete() -> None:
                done = 0
                while done < CLAIM_LOOP_TASKS:
                    claimed = await (await conn.execute(claim_sql, claim_params)).fetchall()
                    if not claimed:
                        raise RuntimeError(f"floor claim came back empty after {done} tasks")
                    async with conn.pipeline(), conn.transaction():
                        for row in claimed:
                            params = {
                                "id": row[0],
                                "worker_id": "worker_bench",
                                "result": '{"ok": 1}',
                                "message": None,
                            }
                            await conn.execute(complete_sql, params)
                    done += len(claimed)

            out.append(("insert_task, autocommit, one per op", await _timed(n, submit)))
            many = len(range(0, n, GATHER)) * GATHER
            label = f"insert_tasks, {GATHER} rows per statement"
            out.append((label, await _timed(many, submit_64)))
            out.append(("get, one per op", await _timed(n, get)))
            out.append(("cancel, autocommit, one per op", await _timed(n, cancel)))
            per_slice = max(1, n // ROUNDS)
            spent = [await purge_slice(per_slice) for _ in range(ROUNDS)]
            out.append(("purge, limit 100 (rows/s)", per_slice * ROUNDS / sum(spent)))
            for start in range(0, CLAIM_LOOP_TASKS, GATHER):
                count = min(GATHER, CLAIM_LOOP_TASKS - start)
                rows = [insert_params("bench.claim", start + j) for j in range(count)]
                text = orjson.dumps(rows).decode()
                await (await conn.execute(insert_many, {"rows": text})).fetchall()
            out.append(
                (
                    f"claim({CLAIM_BATCH}) + {CLAIM_BATCH} completes, 1 txn",
                    await _timed(CLAIM_LOOP_TASKS, claim_complete),
                )
            )
    finally:
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(f'drop schema if exists "{schema}" cascade')
    # One figure per row, in ROWS order, keyed by the row's label.
    return {label: rate for (label, _), (_, rate) in zip(ROWS, out, strict=True)}


async def wal_after_serial_submits(submits: int) -> dict[str, tuple[int, int]]:
    """Each side's ``(WAL bytes, database bytes)`` after ``submits`` serial submits.

    A WAL that checkpoints never catch up with grows without bound under
    sustained writes (it stays at its largest size until reset), so this is
    the size left on disk, read while the store is still open.
    """
    out = {}
    with tempfile.TemporaryDirectory(prefix="store-bench-wal-") as tmp:
        async with sqlite_pair(Path(tmp)) as stores:
            for side in ("cairnq", "engine"):
                for i in range(submits):
                    await stores[side].submit(name="bench", payload={"i": i})
                db = Path(tmp) / f"{side}.db"
                wal = Path(f"{db}-wal")
                out[side] = (wal.stat().st_size if wal.exists() else 0, db.stat().st_size)
    return out


def print_table(
    dialect: str,
    n: int,
    results: list[tuple[str, float, float, float | None]],
    floor_note: str,
) -> None:
    """One line per row: cairnq, engine, engine/cairnq, the row's floor, engine/floor."""
    width = max(len(label) for label, *_ in results)
    print(f"\n{dialect} (n={n}; ops/s, higher is better)")
    print(f"durability: {DURABILITY[dialect]()}")
    print(f"floor: {floor_note}")
    print(
        f"{'row':<{width}}  {'cairnq':>10}  {'engine':>10}  {'ratio':>6}"
        f"  {'floor':>10}  {'engine/floor':>12}"
    )
    for label, peer, ours, floor in results:
        shown = ("-", "-") if floor is None else (f"{floor:,.0f}", f"{ours / floor:.0%}")
        print(
            f"{label:<{width}}  {peer:>10,.0f}  {ours:>10,.0f}  {ours / peer:>5.1f}x"
            f"  {shown[0]:>10}  {shown[1]:>12}"
        )


def add_synchronous_option(parser: argparse.ArgumentParser) -> None:
    """``--synchronous full|normal``: the engine's SQLite durability (also fairness_bench)."""
    parser.add_argument(
        "--synchronous",
        choices=["full", "normal"],
        default="full",
        help="the engine's SQLite durability (default full, as cairnq; normal: an OS "
        "crash or power loss can drop acknowledged commits)",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dialect", choices=["sqlite", "postgres", "both"], default="sqlite")
    parser.add_argument("--n", type=int, default=2_000, help="operations per row (default 2000)")
    add_synchronous_option(parser)
    parser.add_argument(
        "--wal-submits",
        type=int,
        default=10_000,
        help="serial submits before reading each side's WAL size (SQLite; 0 skips)",
    )
    args = parser.parse_args()
    global SYNCHRONOUS
    SYNCHRONOUS = args.synchronous
    dialects = ["sqlite", "postgres"] if args.dialect == "both" else [args.dialect]
    for dialect in dialects:
        if dialect == "sqlite":
            results = asyncio.run(run_dialect(dialect, args.n, sqlite_floor))
            note = (
                f"raw sqlite3, WAL, synchronous={SYNCHRONOUS.upper()}, the engine's "
                "statements, in turns with both sides: one commit per op (gather: one per "
                "group of 64; purge: one per DELETE of 100; claim: the UPDATE, then "
                "one transaction of its completes)"
            )
        else:
            results = asyncio.run(run_dialect(dialect, args.n))
            floors = asyncio.run(postgres_floor(args.n))
            results = [(label, p, e, floors.get(label)) for label, p, e, _ in results]
            note = "the engine's statements alone, bare psycopg, one autocommit connection"
        print_table(dialect, args.n, results, note)
        if dialect == "sqlite" and args.wal_submits > 0:
            sizes = asyncio.run(wal_after_serial_submits(args.wal_submits))
            print(f"WAL after {args.wal_submits:,} serial submits (MB, WAL / database):")
            for side, (wal, db) in sizes.items():
                print(f"  {side:<8} {wal / 1e6:8.1f} / {db / 1e6:.1f}")


if __name__ == "__main__":
    main()
