"""PostgresStore under bad configuration and lost connections.

Killing backends uses a per-test ``application_name`` so only this test's pool
is hit, never another test's connections on the shared server.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest
from pg_support import dsn_for_database

from engine import PostgresStore, StoreClosed, StoreUnavailable
from engine.store.postgres import redact_dsn


def with_params(dsn: str, **params: str) -> str:
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    return make_conninfo(**{**conninfo_to_dict(dsn), **params})


def terminate(dsn: str, app: str) -> list[int]:
    """Kill every backend of this application and wait until they are gone."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        pids = [
            r[0]
            for r in conn.execute(
                "select pid from pg_stat_activity where application_name = %s", (app,)
            ).fetchall()
        ]
        for pid in pids:
            conn.execute("select pg_terminate_backend(%s)", (pid,))
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            left = conn.execute(
                "select count(*) from pg_stat_activity where pid = any(%s)", (pids,)
            ).fetchone()
            if left == (0,):
                break
            time.sleep(0.02)
    return pids


@pytest.fixture
def app_name() -> str:
    return f"cq-test-{uuid.uuid4().hex[:10]}"


@pytest.fixture
async def store(pg_dsn: str, pg_schema: str, app_name: str) -> AsyncIterator[PostgresStore]:
    s = PostgresStore(
        with_params(pg_dsn, application_name=app_name), schema=pg_schema, min_size=2, max_size=3
    )
    await s.connect()
    yield s
    await s.close()


# -- configuration errors ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("dsn", "shown"),
    [
        ("postgresql://u:sekrit@db:5433/app", "postgresql://u:***@db:5433/app"),
        ("postgresql://u@db/app?password=sekrit&sslmode=off", "password=***&sslmode=off"),
        ("host=db password=sekrit dbname=app", "host=db password=*** dbname=app"),
        ("host=db password='se cret' dbname=app", "host=db password=*** dbname=app"),
    ],
)
def test_target_redacts_the_password(dsn: str, shown: str) -> None:
    assert shown in redact_dsn(dsn)
    assert "sekrit" not in PostgresStore(dsn).target and "cret" not in PostgresStore(dsn).target


def test_bad_arguments_are_refused_up_front() -> None:
    for bad in ("1abc", "a-b", "a b", 'x"y', ""):
        with pytest.raises(ValueError, match="schema"):
            PostgresStore("postgresql://localhost/x", schema=bad)
    with pytest.raises(ValueError, match="DSN"):
        PostgresStore("host=x port")
    with pytest.raises(ValueError):
        PostgresStore("postgresql://localhost/x", min_size=5, max_size=2)


@pytest.mark.parametrize(
    "target",
    [
        "postgresql://postgres:sekrit@127.0.0.1:1/test",
        "postgresql://postgres:sekrit@no-such-host.invalid:5432/test",
    ],
)
async def test_unreachable_server_fails_fast_and_clearly(target: str) -> None:
    store = PostgresStore(target, connect_timeout_s=2)
    start = time.monotonic()
    with pytest.raises(StoreUnavailable) as info:
        await store.connect()
    assert time.monotonic() - start < 5
    message = str(info.value)
    assert "sekrit" not in message and "***" in message
    assert target.split("@")[1].split(":")[0] in message
    with pytest.raises(StoreUnavailable):  # operations connect lazily, and fail the same way
        await store.get("task_x")


async def test_missing_database_is_unavailable(pg_dsn: str) -> None:
    store = PostgresStore(dsn_for_database(pg_dsn, f"nope_{uuid.uuid4().hex[:8]}"))
    with pytest.raises(StoreUnavailable, match="nope_"):
        await store.connect()


# -- read-only ------------------------------------------------------------------------------


async def test_read_only_store_reads_and_refuses_writes(
    store: PostgresStore, pg_dsn: str, pg_schema: str
) -> None:
    task = await store.submit(name="n", key="k")
    reader = PostgresStore(pg_dsn, schema=pg_schema, read_only=True)
    await reader.connect()
    try:
        assert await reader.get(task.id) == task
        assert (await reader.get_status_by_key("k")).id == task.id  # type: ignore[union-attr]
        assert await reader.stats()
        for write in (
            reader.submit(name="n"),
            reader.cancel(task.id),
            reader.purge(),
            reader.claim(queues=["default"], worker_id="w"),
        ):
            with pytest.raises(StoreUnavailable, match="read_only"):
                await write
        assert (await store.get(task.id)).status == "queued"  # type: ignore[union-attr]
    finally:
        await reader.close()


# -- lost connections --------------------------------------------------------------------------


async def test_operations_survive_killed_idle_connections(
    store: PostgresStore, pg_dsn: str, app_name: str
) -> None:
    task = await store.submit(name="n")
    assert len(await asyncio.to_thread(terminate, pg_dsn, app_name)) >= 2
    # Dead idle connections are noticed before use and replaced: no error at all.
    assert (await store.get(task.id)).id == task.id  # type: ignore[union-attr]
    assert (await store.cancel(task.id)).status == "canceled"  # type: ignore[union-attr]
    assert (await store.submit(name="n")).status == "queued"


async def test_operation_on_a_connection_killed_mid_statement(
    store: PostgresStore, pg_dsn: str, app_name: str
) -> None:
    await store.submit(name="n")
    (task,) = await store.claim(queues=["default"], worker_id="w")

    async def slow_write(conn: Any) -> None:
        await conn.execute("select pg_sleep(5)")

    settle = asyncio.create_task(
        store.complete_in(task_id=task.id, worker_id="w", result=1, write=slow_write)
    )
    await asyncio.sleep(0.3)
    start = time.monotonic()
    await asyncio.to_thread(terminate, pg_dsn, app_name)
    with pytest.raises(StoreUnavailable, match="unavailable"):
        await settle
    assert time.monotonic() - start < 3
    # Rolled back with the connection; the store recovers by itself.
    assert (await store.get(task.id)).status == "running"  # type: ignore[union-attr]
    done = await store.complete(task_id=task.id, worker_id="w", result=2)
    assert done.status == "succeeded" and done.result == 2


async def test_close_lets_accepted_operations_land(store: PostgresStore) -> None:
    submits = [asyncio.create_task(store.submit(name="n")) for _ in range(10)]
    await asyncio.sleep(0)  # let them get past validation and into the pool
    await store.close()
    landed = [t.result() for t in submits]
    assert len({t.id for t in landed}) == 10
    with pytest.raises(StoreClosed):
        await store.submit(name="late")
    with pytest.raises(StoreClosed):
        await store.connect()
