"""PostgresStore.claim_session_completing and the worker path that uses it: the
completions that free a worker's slots share one COMMIT with the claim refilling
them, and a failing claim never fails the completions.

Each test runs in its own throwaway schema on the real server.
"""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest

from engine import PostgresStore, Task, Worker

W = "worker_A"
OTHER = "worker_B"


@pytest.fixture
def store(pg_store: PostgresStore) -> PostgresStore:
    return pg_store


def statuses(dsn: str, schema: str) -> dict[str, tuple[str, str | None]]:
    """``{id: (status, worker_id)}`` read on a connection of its own (committed rows only)."""
    with psycopg.connect(dsn, autocommit=True, options=f"-c search_path={schema}") as conn:
        rows = conn.execute("select id, status, worker_id from cairnq_tasks").fetchall()
    return {r[0]: (r[1], r[2]) for r in rows}


async def running(store: PostgresStore, count: int, worker: str = W) -> list[Task]:
    for i in range(count):
        await store.submit(name="job", payload={"i": i})
    return await store.claim(queues=["default"], worker_id=worker, limit=count)


async def test_completes_and_claims_in_one_commit(
    store: PostgresStore, pg_dsn: str, pg_schema: str
) -> None:
    held = await running(store, 2)
    await store.submit(name="other")
    (stolen,) = await store.claim(queues=["default"], worker_id=OTHER, names=["other"])
    await store.submit(name="cx")
    (canceling,) = await store.claim(queues=["default"], worker_id=W, names=["cx"])
    await store.cancel(canceling.id)  # cancel wins over the completion
    left = (await store.submit(name="job")).id

    async def plan(draw: Any) -> list[Task]:
        return list(await draw(["job"], 5))

    outcome = await store.claim_session_completing(
        complete_ids=[t.id for t in held] + [stolen.id, canceling.id],
        queues=["default"],
        worker_id=W,
        names=["job"],
        plan=plan,
        single_draw=True,
    )
    assert outcome.claim_error is None
    # Ownership per row: another worker's task is not settled; cancel wins.
    assert outcome.settled == {held[0].id, held[1].id, canceling.id}
    assert [t.id for t in outcome.value or []] == [left]
    # Durable and visible to another connection once the call returned.
    seen = statuses(pg_dsn, pg_schema)
    assert seen[held[0].id] == ("succeeded", W) and seen[held[1].id] == ("succeeded", W)
    assert seen[canceling.id][0] == "canceled"
    assert seen[stolen.id] == ("running", OTHER)
    assert seen[left] == ("running", W)


async def test_probe_finding_nothing_completes_alone(
    store: PostgresStore, pg_dsn: str, pg_schema: str
) -> None:
    held = await running(store, 2)
    called = False

    async def plan(draw: Any) -> None:
        nonlocal called
        called = True

    outcome = await store.claim_session_completing(
        complete_ids=[t.id for t in held], queues=["default"], worker_id=W, names=None, plan=plan
    )
    assert not called and outcome.value is None and outcome.claim_error is None
    assert outcome.settled == {t.id for t in held}
    assert {s for s, _ in statuses(pg_dsn, pg_schema).values()} == {"succeeded"}


async def test_expired_leases_are_recovered_in_the_shared_transaction(store: PostgresStore) -> None:
    held = await running(store, 1)
    await store.submit(name="job")
    (expired,) = await store.claim(queues=["default"], worker_id=OTHER, lease_ms=1)
    await asyncio.sleep(0.02)

    async def plan(draw: Any) -> list[Task]:
        return list(await draw(None, 5))

    outcome = await store.claim_session_completing(
        complete_ids=[held[0].id], queues=["default"], worker_id=W, names=None, plan=plan
    )
    assert outcome.settled == {held[0].id}
    # Recovered (requeued, due now) before the draw, so the same session claims it.
    assert [(t.id, t.attempt, t.worker_id) for t in outcome.value or []] == [(expired.id, 2, W)]


@pytest.mark.parametrize("single_draw", [False, True])
async def test_failing_claim_statement_fails_only_the_claim(
    store: PostgresStore, pg_dsn: str, pg_schema: str, single_draw: bool
) -> None:
    held = await running(store, 2)
    queued = await store.submit(name="job")
    # The server refuses the claim statement itself: a trigger raises when a
    # queued row is leased (completions update running rows and pass). Values
    # the client can see are bad (a limit beyond bigint) never get this far.
    with psycopg.connect(pg_dsn, autocommit=True, options=f"-c search_path={pg_schema}") as conn:
        conn.execute(
            "create function refuse_claim() returns trigger language plpgsql as $$ begin "
            "if old.status = 'queued' and new.status = 'running' then "
            "raise exception 'claims refused'; end if; return new; end $$"
        )
        conn.execute(
            "create trigger refuse_claim before update on cairnq_tasks "
            "for each row execute function refuse_claim()"
        )

    async def plan(draw: Any) -> list[Task]:
        return list(await draw(None, 2))

    outcome = await store.claim_session_completing(
        complete_ids=[t.id for t in held],
        queues=["default"],
        worker_id=W,
        names=None,
        plan=plan,
        single_draw=single_draw,
    )
    assert isinstance(outcome.claim_error, psycopg.errors.RaiseException)
    assert outcome.value is None
    assert outcome.settled == {t.id for t in held}  # written on their own
    seen = statuses(pg_dsn, pg_schema)
    assert seen[queued.id] == ("queued", None)
    assert {seen[t.id][0] for t in held} == {"succeeded"}
    # The connection went back to the pool usable.
    assert (await store.get(queued.id)) is not None


async def test_plan_error_before_commit_rolls_back_the_draw(
    store: PostgresStore, pg_dsn: str, pg_schema: str
) -> None:
    held = await running(store, 1)
    queued = await store.submit(name="job")

    async def plan(draw: Any) -> None:
        await draw(None, 1)
        raise RuntimeError("plan failed")

    outcome = await store.claim_session_completing(
        complete_ids=[held[0].id], queues=["default"], worker_id=W, names=None, plan=plan
    )
    assert isinstance(outcome.claim_error, RuntimeError)
    assert outcome.settled == {held[0].id}
    seen = statuses(pg_dsn, pg_schema)
    assert seen[queued.id] == ("queued", None) and seen[held[0].id][0] == "succeeded"


async def test_single_draw_plan_drawing_twice_keeps_the_committed_completions(
    store: PostgresStore, pg_dsn: str, pg_schema: str
) -> None:
    held = await running(store, 1)
    first = await store.submit(name="job")
    await store.submit(name="job")

    async def plan(draw: Any) -> None:
        await draw(None, 1)
        await draw(None, 1)

    outcome = await store.claim_session_completing(
        complete_ids=[held[0].id],
        queues=["default"],
        worker_id=W,
        names=None,
        plan=plan,
        single_draw=True,
    )
    assert isinstance(outcome.claim_error, RuntimeError)
    # The COMMIT went out with the first draw: the completion is durable (and
    # not written twice), the first draw's row waits for lease recovery.
    assert outcome.settled == {held[0].id}
    seen = statuses(pg_dsn, pg_schema)
    assert seen[held[0].id][0] == "succeeded" and seen[first.id] == ("running", W)


async def test_no_ids_is_a_plain_claim_session(store: PostgresStore) -> None:
    task = await store.submit(name="job")

    async def plan(draw: Any) -> list[Task]:
        return list(await draw(None, 1))

    outcome = await store.claim_session_completing(
        complete_ids=[], queues=["default"], worker_id=W, names=None, plan=plan
    )
    assert outcome.settled == set() and [t.id for t in outcome.value or []] == [task.id]


async def test_validation(store: PostgresStore) -> None:
    async def plan(draw: Any) -> None:
        return None

    with pytest.raises(ValueError):
        await store.claim_session_completing(
            complete_ids=[""], queues=["default"], worker_id=W, names=None, plan=plan
        )
    with pytest.raises(ValueError):
        await store.claim_session_completing(
            complete_ids=["x"], queues="default", worker_id=W, names=None, plan=plan
        )


# -- the worker ------------------------------------------------------------------------


class CountingStore(PostgresStore):
    """The real store, counting shared sessions and able to break the claim statement."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.shared = 0
        self.break_claims = False

    async def claim_session_completing(self, **kwargs: Any) -> Any:
        self.shared += 1
        return await super().claim_session_completing(**kwargs)

    def _draw_statement(self, *args: Any) -> tuple[str, dict[str, Any]] | None:
        if self.break_claims:
            return "select 1 / 0 as boom", {}
        return super()._draw_statement(*args)


async def test_worker_refills_slots_in_the_completing_transaction(
    pg_dsn: str, pg_schema: str
) -> None:
    store = CountingStore(pg_dsn, schema=pg_schema, max_size=4)
    await store.connect()
    try:
        for i in range(60):
            await store.submit(name="noop", payload={"i": i})
        worker = Worker(store, ["default"], concurrency=4)
        active = peak = 0
        runs: list[str] = []

        async def noop(ctx: Any) -> None:
            nonlocal active, peak
            active += 1
            peak = max(peak, active)
            runs.append(ctx.task_id)
            await asyncio.sleep(0)
            active -= 1

        worker.register("noop", noop)
        async with worker.background():
            for _ in range(500):
                stats = await store.stats("default")
                if stats["default"]["succeeded"] == 60:
                    break
                await asyncio.sleep(0.02)
        assert (await store.stats("default"))["default"]["succeeded"] == 60
        assert len(runs) == 60 and len(set(runs)) == 60  # each ran once
        assert peak <= 4
        assert store.shared > 0
        # Never more leases held than slots: at most `concurrency` running rows.
        assert worker.snapshot().concurrency_used == 0
    finally:
        await store.close()


async def test_worker_claim_failure_in_shared_session_still_settles(
    pg_dsn: str, pg_schema: str
) -> None:
    store = CountingStore(pg_dsn, schema=pg_schema, max_size=4)
    await store.connect()
    errors: list[tuple[str, BaseException]] = []
    try:
        for i in range(8):
            await store.submit(name="noop", payload={"i": i})
        worker = Worker(
            store,
            ["default"],
            concurrency=4,
            poll_interval_ms=20,
            on_error=lambda exc, info: errors.append((info["phase"], exc)),
        )
        gate = asyncio.Event()
        done: list[str] = []

        async def noop(ctx: Any) -> None:
            await gate.wait()
            done.append(ctx.task_id)

        worker.register("noop", noop)

        async with worker.background():
            while worker.snapshot().concurrency_used < 4:
                await asyncio.sleep(0.01)
            store.break_claims = True  # the next claims fail on the server
            gate.set()
            while len(done) < 4:
                await asyncio.sleep(0.01)
            while (await store.stats("default"))["default"]["succeeded"] < 4:
                await asyncio.sleep(0.01)
            assert any(phase == "claim" for phase, _ in errors)
            store.break_claims = False
            while (await store.stats("default"))["default"]["succeeded"] < 8:
                await asyncio.sleep(0.01)
        assert len(done) == 8 and len(set(done)) == 8
        assert all(phase == "claim" for phase, _ in errors)
        assert all(isinstance(exc, psycopg.errors.DivisionByZero) for _, exc in errors)
    finally:
        await store.close()


@pytest.mark.parametrize("positional", [True, False])
async def test_the_draw_builds_the_same_tasks_by_position_or_by_name(
    store: PostgresStore, positional: bool
) -> None:
    """The draw's rows become ``Task``s by position on the protocol's table (no dict
    per row) and by column name otherwise; both read the same claimed rows."""
    (held,) = await running(store, 1)
    for i in range(3):
        await store.submit(name="job", payload={"n": i, "deep": {"x": [1]}}, priority=i % 2)

    async def plan(draw: Any) -> list[Task]:
        return list(await draw(["job"], 5))

    assert store._positional
    store._positional = positional
    outcome = await store.claim_session_completing(
        complete_ids=[held.id],
        queues=["default"],
        worker_id=W,
        names=["job"],
        plan=plan,
        single_draw=True,
    )
    claimed = outcome.value or []
    assert [t.payload["n"] for t in claimed] == [1, 0, 2]  # claim order: priority first
    assert claimed == [await store.get(t.id) for t in claimed]
    assert all(t.status == "running" and t.worker_id == W for t in claimed)
