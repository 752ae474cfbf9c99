"""``claim_session_completing`` on both dialects: the completions that free a
worker's slots and the claim refilling them commit together, or not at all.

(Postgres-only details, such as the COMMIT travelling with a single draw, are in
test_postgres_completing_claim.py.)
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from store_support import Database

from engine import PostgresStore, SQLiteStore, Task, TaskStore, Worker

W = "worker_A"
OTHER = "worker_B"


def statuses(database: Database) -> dict[str, tuple[str, str | None]]:
    """``{id: (status, worker_id)}`` as another connection sees them (committed rows)."""
    return {
        r[0]: (r[1], r[2]) for r in database.rows("select id, status, worker_id from cairnq_tasks")
    }


async def running(store: TaskStore, count: int, worker: str = W, name: str = "job") -> list[Task]:
    for i in range(count):
        await store.submit(name=name, payload={"i": i})
    return await store.claim(queues=["default"], worker_id=worker, limit=count, names=[name])


def completing(store: TaskStore) -> Any:
    assert store.capabilities.completing_claim
    assert isinstance(store, SQLiteStore | PostgresStore)
    return store.claim_session_completing


def refuse_updates(database: Database, when: str) -> None:
    """A trigger that makes the server refuse an update of ``cairnq_tasks`` rows
    matching ``when`` (a condition on ``old``/``new``, the same in both dialects)."""
    if database.dialect == "sqlite":
        database.execute(
            "create trigger refuse before update on cairnq_tasks "
            f"when {when} begin select raise(abort, 'refused by test'); end;"
        )
        return
    database.execute(
        "create function refuse() returns trigger language plpgsql as $$ begin "
        f"if {when} then raise exception 'refused by test'; end if; return new; end $$"
    )
    database.execute(
        "create trigger refuse before update on cairnq_tasks for each row execute function refuse()"
    )


async def test_completes_and_claims_in_one_commit(store: TaskStore, database: Database) -> None:
    held = await running(store, 2)
    (stolen,) = await running(store, 1, worker=OTHER, name="other")
    (canceling,) = await running(store, 1, name="cx")
    await store.cancel(canceling.id)  # cancel wins over the completion
    left = (await store.submit(name="job")).id
    # Completions end tasks: a waiter hears of them as it does of complete_many.
    waiter = asyncio.ensure_future(store.task_done_wake(held[0].id, 30_000))
    await asyncio.sleep(0)

    async def plan(draw: Any) -> list[Task]:
        return list(await draw(["job"], 5))

    outcome = await completing(store)(
        complete_ids=[t.id for t in held] + [stolen.id, canceling.id],
        queues=["default"],
        worker_id=W,
        names=["job"],
        plan=plan,
    )
    assert outcome.claim_error is None
    # Ownership per row: another worker's task is not settled; cancel wins.
    assert outcome.settled == {held[0].id, held[1].id, canceling.id}
    assert [t.id for t in outcome.value or []] == [left]
    seen = statuses(database)  # durable, and visible to another connection
    assert seen[held[0].id] == ("succeeded", W) and seen[held[1].id] == ("succeeded", W)
    assert seen[canceling.id][0] == "canceled"
    assert seen[stolen.id] == ("running", OTHER)
    assert seen[left] == ("running", W)
    assert (await waiter) is True


async def test_probe_finding_nothing_completes_alone(store: TaskStore, database: Database) -> None:
    held = await running(store, 2)
    called = False

    async def plan(draw: Any) -> None:
        nonlocal called
        called = True

    outcome = await completing(store)(
        complete_ids=[t.id for t in held], queues=["default"], worker_id=W, names=None, plan=plan
    )
    assert not called and outcome.value is None and outcome.claim_error is None
    assert outcome.settled == {t.id for t in held}
    assert {s for s, _ in statuses(database).values()} == {"succeeded"}


async def test_single_draw_with_completions_skips_the_probe(
    store: TaskStore, database: Database
) -> None:
    """Completions open a write transaction anyway: a single-draw plan then
    draws in it without a probe first (an empty draw, here), and still no
    probe-less transaction is opened for a plan with nothing to complete."""
    held = await running(store, 2)
    draws: list[int] = []

    async def plan(draw: Any) -> list[Task]:
        rows = list(await draw(["job"], 4))
        draws.append(len(rows))
        return rows

    outcome = await completing(store)(
        complete_ids=[t.id for t in held],
        queues=["default"],
        worker_id=W,
        names=["job"],
        plan=plan,
        single_draw=True,
    )
    assert draws == [0] and outcome.value == [] and outcome.claim_error is None
    assert outcome.settled == {t.id for t in held}
    assert {s for s, _ in statuses(database).values()} == {"succeeded"}

    outcome = await completing(store)(
        complete_ids=[], queues=["default"], worker_id=W, names=["job"], plan=plan, single_draw=True
    )
    assert draws == [0] and outcome.value is None and outcome.settled == set()


async def test_expired_leases_are_recovered_in_the_shared_transaction(store: TaskStore) -> None:
    held = await running(store, 1)
    await store.submit(name="job")
    (expired,) = await store.claim(queues=["default"], worker_id=OTHER, lease_ms=1)
    await asyncio.sleep(0.02)

    async def plan(draw: Any) -> list[Task]:
        return list(await draw(None, 5))

    outcome = await completing(store)(
        complete_ids=[held[0].id], queues=["default"], worker_id=W, names=None, plan=plan
    )
    assert outcome.settled == {held[0].id}
    assert [(t.id, t.attempt, t.worker_id) for t in outcome.value or []] == [(expired.id, 2, W)]


async def test_failing_claim_fails_only_the_claim(store: TaskStore, database: Database) -> None:
    held = await running(store, 2)
    queued = await store.submit(name="job")
    refuse_updates(database, "old.status = 'queued' and new.status = 'running'")

    async def plan(draw: Any) -> list[Task]:
        return list(await draw(None, 2))

    outcome = await completing(store)(
        complete_ids=[t.id for t in held], queues=["default"], worker_id=W, names=None, plan=plan
    )
    assert outcome.claim_error is not None and "refused by test" in str(outcome.claim_error)
    assert outcome.value is None
    assert outcome.settled == {t.id for t in held}  # written on their own
    seen = statuses(database)
    assert seen[queued.id] == ("queued", None)
    assert {seen[t.id][0] for t in held} == {"succeeded"}
    assert (await store.get(queued.id)) is not None  # the store is still usable


async def test_plan_error_rolls_back_the_draw(store: TaskStore, database: Database) -> None:
    held = await running(store, 1)
    queued = await store.submit(name="job")

    async def plan(draw: Any) -> None:
        await draw(None, 1)
        raise RuntimeError("plan failed")

    outcome = await completing(store)(
        complete_ids=[held[0].id], queues=["default"], worker_id=W, names=None, plan=plan
    )
    assert isinstance(outcome.claim_error, RuntimeError)
    assert outcome.settled == {held[0].id}
    seen = statuses(database)
    assert seen[queued.id] == ("queued", None) and seen[held[0].id][0] == "succeeded"


async def test_failing_completion_raises_and_lands_nothing(
    store: TaskStore, database: Database
) -> None:
    good, bad = await running(store, 2)
    queued = await store.submit(name="job")
    refuse_updates(database, f"old.id = '{bad.id}' and new.status = 'succeeded'")

    async def plan(draw: Any) -> list[Task]:
        return list(await draw(None, 2))

    with pytest.raises(Exception, match="refused by test"):
        await completing(store)(
            complete_ids=[good.id, bad.id], queues=["default"], worker_id=W, names=None, plan=plan
        )
    # The shared statement failed: neither completion nor claim landed (the
    # worker then writes each completion alone; see the worker test below).
    seen = statuses(database)
    assert seen[good.id] == ("running", W) and seen[bad.id] == ("running", W)
    assert seen[queued.id] == ("queued", None)


_CRASHER = textwrap.dedent(
    """
    import asyncio, os, sys
    from engine import PostgresStore, SQLiteStore

    dialect, where, schema, *ids = sys.argv[1:]

    async def main():
        if dialect == "sqlite":
            store = SQLiteStore(where)
        else:
            store = PostgresStore(where, schema=schema, max_size=2)
        await store.connect()

        async def plan(draw):
            await draw(None, 5)
            os._exit(3)  # the process dies inside the transaction, before COMMIT

        await store.claim_session_completing(
            complete_ids=ids, queues=["default"], worker_id="worker_A", names=None, plan=plan
        )

    asyncio.run(main())
    """
)


async def test_a_crash_before_commit_leaves_both_undone(
    store: TaskStore, database: Database
) -> None:
    held = await running(store, 2)
    queued = [(await store.submit(name="job")).id for _ in range(3)]
    if database.dialect == "sqlite":
        where, schema = str(database.sqlite_path), "-"
    else:
        where, schema = str(database.dsn), str(database.schema)
    proc = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", _CRASHER, database.dialect, where, schema, *(t.id for t in held)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ},
    )
    assert proc.returncode == 3, proc.stderr
    seen = statuses(database)
    assert {seen[t.id] for t in held} == {("running", W)}
    assert {seen[i] for i in queued} == {("queued", None)}
    # Nothing is left locked: this store writes at once.
    assert {t.id for t in await store.claim(queues=["default"], worker_id=W, limit=5)} == set(
        queued
    )


async def test_worker_settles_the_others_when_one_completion_is_refused(
    store: TaskStore, database: Database
) -> None:
    tasks = [await store.submit(name="noop", payload={"i": i}) for i in range(12)]
    bad = tasks[5].id
    refuse_updates(database, f"old.id = '{bad}' and new.status = 'succeeded'")
    worker = Worker(store, ["default"], concurrency=4)
    ran: set[str] = set()

    async def noop(ctx: Any) -> None:
        ran.add(ctx.task_id)

    worker.register("noop", noop)
    async with worker.background():
        while True:
            seen = statuses(database)
            if (
                sum(s == "succeeded" for s, _ in seen.values()) == 11
                and not worker.snapshot().calls
            ):
                break
            await asyncio.sleep(0.01)
    seen = statuses(database)
    assert seen[bad] == ("running", worker.worker_id)  # left to its lease
    assert all(seen[t.id][0] == "succeeded" for t in tasks if t.id != bad)
    errors = worker.snapshot().recent_errors
    assert errors and all(e.task_id == bad for e in errors)


async def test_settles_commit_with_the_claim_each_checked_on_its_own(
    store: TaskStore, database: Database
) -> None:
    """Results and failures ride the transaction: a lost lease is None, not an error."""
    valued, failing, bare = await running(store, 3)
    (stolen,) = await running(store, 1, worker=OTHER, name="other")
    left = (await store.submit(name="job")).id
    assert isinstance(store, SQLiteStore | PostgresStore)
    settles = [
        store.owned_complete(task_id=valued.id, worker_id=W, result={"ok": [1, 2]}),
        store.owned_fail(task_id=failing.id, worker_id=W, error={"message": "no"}, retryable=False),
        store.owned_complete(task_id=stolen.id, worker_id=W, result=1),
    ]

    async def plan(draw: Any) -> list[Task]:
        return list(await draw(["job"], 5))

    outcome = await completing(store)(
        complete_ids=[bare.id],
        queues=["default"],
        worker_id=W,
        names=["job"],
        plan=plan,
        single_draw=True,
        settles=settles,
    )
    assert outcome.claim_error is None and outcome.settled == {bare.id}
    assert [t.id for t in outcome.value or []] == [left]
    rows = outcome.written
    assert rows[stolen.id] is None
    done, failed = rows[valued.id], rows[failing.id]
    assert isinstance(done, Task) and done.status == "succeeded" and done.result == {"ok": [1, 2]}
    assert isinstance(failed, Task) and failed.status == "failed"
    seen = statuses(database)
    assert seen[valued.id][0] == seen[bare.id][0] == "succeeded"
    assert seen[failing.id][0] == "failed" and seen[stolen.id] == ("running", OTHER)


async def test_a_refused_settle_is_written_alone_and_only_it_fails(
    store: TaskStore, database: Database
) -> None:
    good, bad = await running(store, 2)
    queued = (await store.submit(name="job")).id
    refuse_updates(database, f"old.id = '{bad.id}' and new.status = 'succeeded'")
    assert isinstance(store, SQLiteStore | PostgresStore)
    settles = [store.owned_complete(task_id=t.id, worker_id=W, result="r") for t in (good, bad)]

    async def plan(draw: Any) -> list[Task]:
        return list(await draw(["job"], 5))

    outcome = await completing(store)(
        complete_ids=[],
        queues=["default"],
        worker_id=W,
        names=["job"],
        plan=plan,
        single_draw=True,
        settles=settles,
    )
    # The shared transaction rolled back (the claim with it); each went alone.
    assert outcome.value is None and outcome.claim_error is None
    assert isinstance(outcome.written[good.id], Task)
    assert isinstance(outcome.written[bad.id], Exception)
    seen = statuses(database)
    assert seen[good.id][0] == "succeeded" and seen[bad.id] == ("running", W)
    assert seen[queued] == ("queued", None)
