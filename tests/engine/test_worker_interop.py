"""Interop with the cairnq 0.15.1 SDK on one database, both dialects: an engine
worker drains what cairnq submitted, and a cairnq worker drains what the engine
submitted, with batches and keys.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from worker_support import DIALECTS

from engine import CairnQ, Worker
from engine.store.postgres import PostgresStore
from engine.store.sqlite import SQLiteStore

cairnq = pytest.importorskip("cairnq")

pytestmark = pytest.mark.peer


@dataclass
class Shared:
    engine: CairnQ
    peer: Any


@pytest.fixture(params=DIALECTS)
async def shared(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Shared]:
    if request.param == "sqlite":
        path = str(tmp_path / "shared.db")
        peer = cairnq.CairnQ.sqlite(path)
        engine = CairnQ(SQLiteStore(path))
    else:
        dsn, schema = request.getfixturevalue("pg_dsn"), request.getfixturevalue("pg_schema")
        peer = cairnq.CairnQ.postgres(dsn, schema=schema, max_size=3)
        engine = CairnQ(PostgresStore(dsn, schema=schema, max_size=3))
    await peer.connect()  # the peer creates the database
    await engine.connect()
    try:
        yield Shared(engine, peer)
    finally:
        await engine.close()
        await peer.close()


async def test_engine_worker_drains_cairnq_submissions(shared: Shared) -> None:
    peer = shared.peer
    singles = [await peer.submit("double", {"n": i}) for i in range(20)]
    keyed = await peer.submit("double", {"n": 100}, key="k:1")
    reused = await peer.submit("double", {"n": 999}, key="k:1")
    assert reused.id == keyed.id
    batched = [await peer.submit("sum.batch", {"n": i}) for i in range(10)]

    worker = Worker(shared.engine.store, ["default"], concurrency=4, poll_interval_ms=20)
    sizes: list[int] = []

    @worker.task
    async def double(ctx, payload):
        return payload["n"] * 2

    @worker.task("sum.batch", batch=4)
    async def summed(ctxs):
        sizes.append(len(ctxs))
        return {c.task_id: c.payload["n"] + 1000 for c in ctxs}

    async with worker.background():
        for task in [*singles, keyed, *batched]:
            done = await peer.wait(task.id, timeout_ms=10_000)
            assert done.status == "succeeded"
    assert [(await peer.get(t.id)).result for t in singles] == [i * 2 for i in range(20)]
    assert (await peer.get_by_key("k:1")).result == 200
    assert sorted([(await peer.get(t.id)).result for t in batched]) == list(range(1000, 1010))
    assert sum(sizes) == 10 and max(sizes) <= 4


async def test_cairnq_worker_drains_engine_submissions(shared: Shared) -> None:
    engine = shared.engine
    singles = [await engine.submit("greet", {"who": f"w{i}"}) for i in range(15)]
    keyed = await engine.submit("greet", {"who": "first"}, key="g:1")
    replaced = await engine.submit("greet", {"who": "second"}, key="g:1", conflict="replace")
    batched = [await engine.submit("pack", {"i": i}) for i in range(9)]

    worker = cairnq.Worker(shared.peer.store, ["default"], concurrency=4, poll_interval_ms=20)
    sizes: list[int] = []

    @worker.task
    async def greet(ctx, payload):
        return f"hello {payload['who']}"

    @worker.task("pack", batch=3)
    async def pack(ctxs):
        sizes.append(len(ctxs))
        return {c.task_id: c.payload["i"] * 3 for c in ctxs}

    async with worker.background():
        for task in [*singles, replaced, *batched]:
            done = await engine.wait(task.id, timeout_ms=10_000, poll_ms=20)
            assert done.status == "succeeded"
        by_key = await engine.wait_by_key("g:1", timeout_ms=10_000, poll_ms=20)
    assert by_key.id == replaced.id and by_key.result == "hello second"
    assert (await engine.get(keyed.id)).status == "canceled"  # type: ignore[union-attr]
    assert [(await engine.get(t.id)).result for t in singles] == [  # type: ignore[union-attr]
        f"hello w{i}" for i in range(15)
    ]
    assert sorted([(await engine.get(t.id)).result for t in batched]) == [  # type: ignore[union-attr]
        i * 3 for i in range(9)
    ]
    assert sum(sizes) == 9 and max(sizes) <= 3


async def test_calls_answered_across_sides(shared: Shared) -> None:
    # call() from each side, its worker on the other. On Postgres the workers'
    # idle polls are far apart, so each claim is woken by the caller's NOTIFY
    # (the engine then claims without probing first) and each waiter by the
    # worker's; on SQLite cairnq has no wakeups and polls.
    postgres = isinstance(shared.engine.store, PostgresStore)
    idle_ms = 600_000 if postgres else 20
    engine_worker = Worker(shared.engine.store, ["engine"], concurrency=8, poll_interval_ms=idle_ms)
    peer_worker = cairnq.Worker(
        shared.peer.store, ["peer"], concurrency=8, poll_interval_ms=idle_ms
    )

    @engine_worker.task("add")
    async def engine_add(ctx, payload):
        return {"sum": payload["a"] + payload["b"], "by": "engine"}

    @peer_worker.task("add")
    async def peer_add(ctx, payload):
        return {"sum": payload["a"] + payload["b"], "by": "peer"}

    async with engine_worker.background(), peer_worker.background():
        for i in range(5):
            by_peer = await shared.engine.call("add", {"a": i, "b": 1}, queue="peer")
            assert by_peer == {"sum": i + 1, "by": "peer"}
            by_engine = await shared.peer.call(
                "add", {"a": i, "b": 2}, queue="engine", timeout_ms=10_000
            )
            assert by_engine == {"sum": i + 2, "by": "engine"}
