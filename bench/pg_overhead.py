"""The Postgres store's own cost per call, against its bare statements, interleaved.

Run from the repository root::

    python bench/pg_overhead.py [--rounds 20] [--chunk 50]

store_bench.py measures each row and its floor minutes apart, and on a shared
2-core machine the load moves more than the gap being measured. Here the
engine's sequential submit, get and cancel and the same statements on a bare
psycopg connection (one prepared statement per op, autocommit, one
connection, same schema, indexes and trigger) alternate in chunks, in one
process, each side first every other round. Per op it prints the median chunk
time of each side, engine/floor as a rate, and the median of the per-round
ratios (the figure least moved by load). Server from ``CAIRNQ_TEST_PG_DSN``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


async def run(rounds: int, chunk: int) -> None:
    import psycopg

    from engine import PostgresStore
    from engine._ids import new_task_id
    from engine.store.postgres import _sql

    dsn = os.environ.get("CAIRNQ_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
    tag = uuid.uuid4().hex[:8]
    engine_schema, floor_schema = f"overhead_e_{tag}", f"overhead_f_{tag}"
    migrated = PostgresStore(dsn, schema=floor_schema)
    await migrated.connect()
    await migrated.close()
    store = PostgresStore(dsn, schema=engine_schema)
    await store.connect()
    conn = await psycopg.AsyncConnection.connect(
        dsn, autocommit=True, prepare_threshold=0, options=f"-c search_path={floor_schema}"
    )
    insert, get_sql, cancel_sql = _sql("insert_task"), _sql("get"), _sql("cancel")
    floor_ids: list[str] = []
    engine_ids: list[str] = []
    canceled = {"floor": 0, "engine": 0}

    async def floor_submit() -> None:
        for i in range(chunk):
            task_id = new_task_id()
            floor_ids.append(task_id)
            params = {
                "id": task_id,
                "name": "bench",
                "queue": "default",
                "payload": f'{{"i":{i}}}',
                "metadata": "{}",
                "max_attempts": 3,
                "priority": 0,
                "parent_id": None,
                "root_id": task_id,
                "correlation_id": None,
                "delay_ms": 0,
            }
            await (await conn.execute(insert, params)).fetchone()

    async def engine_submit() -> None:
        for i in range(chunk):
            engine_ids.append((await store.submit(name="bench", payload={"i": i})).id)

    async def floor_get() -> None:
        for task_id in floor_ids[-chunk:]:
            await (await conn.execute(get_sql, {"id": task_id})).fetchone()

    async def engine_get() -> None:
        for task_id in engine_ids[-chunk:]:
            await store.get(task_id)

    async def floor_cancel() -> None:
        start = canceled["floor"]
        for task_id in floor_ids[start : start + chunk]:
            await (await conn.execute(cancel_sql, {"id": task_id})).fetchone()
        canceled["floor"] += chunk

    async def engine_cancel() -> None:
        start = canceled["engine"]
        for task_id in engine_ids[start : start + chunk]:
            await store.cancel(task_id)
        canceled["engine"] += chunk

    ops: dict[str, tuple[Callable[[], Awaitable[None]], Callable[[], Awaitable[None]]]] = {
        "sequential submit": (floor_submit, engine_submit),
        "get": (floor_get, engine_get),
        "cancel": (floor_cancel, engine_cancel),
    }
    times: dict[str, dict[str, list[float]]] = {op: {"floor": [], "engine": []} for op in ops}
    try:
        for r in range(rounds):
            for op, (floor, engine) in ops.items():
                sides: list[tuple[str, Any]] = [("floor", floor), ("engine", engine)]
                for side, body in sides if r % 2 == 0 else sides[::-1]:
                    start = time.perf_counter()
                    await body()
                    times[op][side].append((time.perf_counter() - start) / chunk * 1e6)
    finally:
        await store.close()
        await conn.close()
        with psycopg.connect(dsn, autocommit=True) as admin:
            for schema in (engine_schema, floor_schema):
                admin.execute(f'drop schema if exists "{schema}" cascade')
    print(f"postgres, {rounds} rounds of {chunk} ops per side (median per op; engine/floor)")
    print(f"{'row':<18} {'floor':>9} {'engine':>9} {'rate':>6} {'paired':>7}")
    for op, sides_times in times.items():
        floor_us = statistics.median(sides_times["floor"])
        engine_us = statistics.median(sides_times["engine"])
        paired = statistics.median(
            f / e for f, e in zip(sides_times["floor"], sides_times["engine"], strict=True)
        )
        print(
            f"{op:<18} {floor_us:>7.0f}us {engine_us:>7.0f}us "
            f"{floor_us / engine_us:>5.0%} {paired:>7.0%}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--chunk", type=int, default=50)
    args = parser.parse_args()
    asyncio.run(run(args.rounds, args.chunk))


if __name__ == "__main__":
    main()
