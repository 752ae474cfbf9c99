"""Settlement, leases, max_run_ms, backoff and the byte budget (docs/protocol-notes.md,
"Worker"), on both dialects, through real handlers.
"""

from __future__ import annotations

import asyncio

import pytest
from worker_support import Overlap, eventually, finished

from engine import LostLease, SerializationError, TaskError, TaskStore, UnsupportedBackend, Worker


def fast_worker(store: TaskStore, **kwargs: object) -> Worker:
    options: dict = {"poll_interval_ms": 20, "retry_backoff_ms": 0, **kwargs}
    return Worker(store, ["default"], **options)


async def test_return_value_and_batch_mapping_settle_leftovers(store: TaskStore) -> None:
    worker = fast_worker(store, concurrency=2)

    @worker.task
    async def double(ctx, payload):
        return payload["n"] * 2

    @worker.task(batch=3)
    async def trio(ctxs):
        ctxs = sorted(ctxs, key=lambda c: c.payload["i"])  # claims come back unordered
        await ctxs[0].succeed("early")
        await ctxs[1].fail("no good", retryable=False)
        return {c.task_id: f"mapped-{c.payload['i']}" for c in ctxs}

    single = await store.submit(name="double", payload={"n": 21})
    batch = [await store.submit(name="trio", payload={"i": i}) for i in range(3)]
    async with worker.background():
        done = await finished(store, [single.id] + [t.id for t in batch])
    assert done[0].result == 42 and done[0].progress == 1.0
    by_id = {t.id: t for t in done[1:]}
    statuses = sorted((t.status, t.result) for t in by_id.values())
    assert statuses == [("failed", None), ("succeeded", "early"), ("succeeded", "mapped-2")]


async def test_batch_returning_non_mapping_succeeds_without_results(store: TaskStore) -> None:
    worker = fast_worker(store)

    @worker.task(batch=4)
    async def pack(ctxs):
        return ["not", "a", "mapping"]

    ids = [(await store.submit(name="pack")).id for _ in range(3)]
    async with worker.background():
        done = await finished(store, ids)
    assert [(t.status, t.result) for t in done] == [("succeeded", None)] * 3


async def test_raising_fails_every_leftover_by_kind(store: TaskStore) -> None:
    worker = fast_worker(store)

    @worker.task(batch=2)
    async def permanent(ctxs):
        raise TaskError("bad input", code="bad_input", details={"field": "x"})

    @worker.task
    async def flaky(ctx):
        raise RuntimeError("boom")

    @worker.task
    async def soft(ctx):
        raise TaskError("try later", retryable=True)

    perm = [(await store.submit(name="permanent")).id for _ in range(2)]
    flaky_id = (await store.submit(name="flaky", max_attempts=2)).id
    soft_id = (await store.submit(name="soft", max_attempts=1)).id
    async with worker.background():
        done = await finished(store, [*perm, flaky_id, soft_id])
        snap = worker.snapshot()
    for task in done[:2]:
        assert task.status == "failed" and task.attempt == 1
        assert task.error == {
            "type": "TaskError", "code": "bad_input", "message": "bad input",
            "retryable": False, "details": {"field": "x"},
        }  # fmt: skip
    assert done[2].status == "failed" and done[2].attempt == 2  # retried once
    assert done[2].error["code"] == "handler_error" and done[2].error["type"] == "RuntimeError"
    assert done[3].error["retryable"] is True and done[3].status == "failed"
    kinds = {f.exception_type for f in snap.recent_failures}
    assert {"TaskError", "RuntimeError"} <= kinds
    assert any("boom" in f.traceback for f in snap.recent_failures)
    # Each handler failure names the attempt it ended: flaky failed twice.
    assert sorted(f.attempt for f in snap.recent_failures if f.task_id == flaky_id) == [1, 2]


async def test_settling_twice_is_a_silent_noop(store: TaskStore) -> None:
    worker = fast_worker(store)
    outcomes = []

    @worker.task
    async def twice(ctx):
        outcomes.append(await ctx.succeed(1))
        outcomes.append(await ctx.succeed(2))
        outcomes.append(await ctx.fail("late"))
        with pytest.raises(LostLease):
            await ctx.progress(0.5)  # settled: refused locally, not flagged lost
        outcomes.append(ctx.lost_lease)
        return 3

    task = await store.submit(name="twice")
    async with worker.background():
        (done,) = await finished(store, [task.id])
    assert done.status == "succeeded" and done.result == 1
    assert outcomes[0] is not None and outcomes[1:] == [None, None, False]


async def test_unserializable_result_fails_permanently(store: TaskStore) -> None:
    worker = fast_worker(store)
    raised = []

    @worker.task
    async def odd(ctx):
        with pytest.raises(SerializationError):
            await ctx.succeed(float("nan"))
        raised.append(ctx.settled)
        return {1, 2}

    task = await store.submit(name="odd", max_attempts=3)
    async with worker.background():
        (done,) = await finished(store, [task.id])
    assert raised == [False]  # a refused result leaves the context unsettled
    assert done.status == "failed" and done.attempt == 1
    assert done.error["code"] == "unserializable_result" and done.error["retryable"] is False


async def test_handler_raising_lost_lease_writes_nothing(store: TaskStore) -> None:
    worker = fast_worker(store, lease_ms=60_000)

    @worker.task
    async def walk_away(ctx):
        raise LostLease(ctx.task_id)

    task = await store.submit(name="walk_away")
    async with worker.background():
        await eventually(lambda: worker.snapshot().tasks_claimed == 1)
        await eventually(lambda: not worker.snapshot().calls)
    row = await store.get(task.id)
    assert row is not None and row.status == "running" and row.error is None


async def test_cancel_wins_and_is_seen_through_heartbeats(store: TaskStore) -> None:
    worker = fast_worker(store, lease_ms=300)
    seen = []

    @worker.task
    async def long(ctx):
        for _ in range(200):
            if ctx.lease_lost.is_set() or worker.snapshot().calls[0].cancel_requested:
                break
            await asyncio.sleep(0.01)
        seen.append(await ctx.canceled())
        return "ignored"

    task = await store.submit(name="long")
    async with worker.background():
        await eventually(lambda: bool(worker.snapshot().calls))
        await store.cancel(task.id)
        (done,) = await finished(store, [task.id])
    assert seen == [True]
    assert done.status == "canceled" and done.result is None


async def test_lease_loss_of_one_task_in_a_batch(store: TaskStore) -> None:
    worker = fast_worker(store, lease_ms=2_000, heartbeat_interval_ms=50)
    report = {}

    @worker.task(batch=2)
    async def pair(ctxs):
        first, second = sorted(ctxs, key=lambda c: c.payload["i"])
        # Settle the first behind the context's back (as a recovery or another
        # worker would): the next heartbeat must find it missing.
        await store.fail(
            task_id=first.task_id,
            worker_id=worker.worker_id,
            error={"type": "X", "code": "x", "message": "gone", "retryable": False},
            retryable=False,
        )
        await asyncio.wait_for(first.lease_lost.wait(), 5)
        report["flags"] = (first.lost_lease, second.lost_lease)
        report["call"] = worker.snapshot().calls[0]
        with pytest.raises(LostLease):
            await first.progress(0.5)
        with pytest.raises(LostLease):
            await first.submit("child")
        await second.progress(0.25, "halfway")
        report["after"] = worker.snapshot().calls[0]
        return {first.task_id: "never written", second.task_id: "kept"}

    ids = [(await store.submit(name="pair", payload={"i": i})).id for i in range(2)]
    async with worker.background():
        first, second = await finished(store, ids)
    assert report["flags"] == (True, False)
    assert report["call"].lost and not report["call"].settled
    task_states = {t.task_id: (t.lost, t.progress, t.message) for t in report["after"].tasks}
    assert task_states[second.id] == (False, 0.25, "halfway")
    assert first.status == "failed" and first.error["message"] == "gone"
    assert second.status == "succeeded" and second.result == "kept"


async def test_max_run_ms_abandons_the_call_and_frees_the_slot(store: TaskStore) -> None:
    worker = fast_worker(store, max_run_ms=150, concurrency=1)
    flags = []
    release = asyncio.Event()

    @worker.task
    async def hang(ctx):
        try:
            await release.wait()
        finally:
            flags.append(ctx.lost_lease)

    @worker.task
    async def quick(ctx):
        return "ran"

    stuck = await store.submit(name="hang", max_attempts=1)
    after = await store.submit(name="quick")
    async with worker.background():
        stuck_done, after_done = await finished(store, [stuck.id, after.id])
    assert flags == [True]  # flagged lost before the handler was cancelled
    assert stuck_done.status == "failed"
    assert stuck_done.error["code"] == "handler_timeout"
    assert stuck_done.error["type"] == "HandlerTimeout"
    assert "max_run_ms=150" in stuck_done.error["message"]
    assert after_done.result == "ran"


async def test_backoff_window_of_first_retry(store: TaskStore) -> None:
    worker = Worker(store, ["default"], poll_interval_ms=20, retry_backoff_ms=10_000)

    @worker.task
    async def flaky(ctx):
        raise RuntimeError("again")

    ids = [(await store.submit(name="flaky", max_attempts=3)).id for _ in range(5)]
    async with worker.background():
        await eventually(lambda: worker.snapshot().tasks_claimed == 5)
        await eventually(lambda: not worker.snapshot().calls)
    for task_id in ids:
        row = await store.get(task_id)
        assert row is not None and row.status == "queued" and row.attempt == 1
        assert 5_000 <= row.run_at_ms - row.updated_at_ms < 10_000


async def test_byte_budget_bounds_calls_between_claims(store: TaskStore) -> None:
    worker = fast_worker(store, concurrency=6, claim_batch=1, max_in_flight_bytes=100)
    seen = Overlap()
    budgets = []

    @worker.task
    async def load(ctx, payload):
        snap = worker.snapshot()
        budgets.append((snap.bytes_in_flight, snap.max_in_flight_bytes))
        await seen.hold(0.05, "load")

    blob = "x" * 50  # 60 bytes of compact JSON with its key
    ids = [(await store.submit(name="load", payload={"b": blob})).id for _ in range(6)]
    big = await store.submit(name="load", payload={"b": "y" * 500})
    async with worker.background():
        await finished(store, [*ids, big.id])
    # 60 < 100 lets a second claim through; 120 >= 100 stops the third.
    assert seen.peak["load"] == 2
    assert max(b for b, _ in budgets) <= 120 + 510
    assert all(limit == 100 for _, limit in budgets)


async def test_payload_over_budget_runs_alone(store: TaskStore) -> None:
    worker = fast_worker(store, concurrency=4, claim_batch=1, max_in_flight_bytes=10)
    seen = Overlap()

    @worker.task
    async def heavy(ctx):
        await seen.hold(0.03, "heavy")

    ids = [(await store.submit(name="heavy", payload={"b": "z" * 40})).id for _ in range(3)]
    async with worker.background():
        done = await finished(store, ids)
    assert all(t.status == "succeeded" for t in done)
    assert seen.peak["heavy"] == 1


async def test_succeed_in_commits_the_callers_write_with_the_result(
    store: TaskStore, request: pytest.FixtureRequest
) -> None:

    worker = fast_worker(store)
    outcome = []

    @worker.task
    async def ingest(ctx, payload):
        async def write(conn):
            await conn.execute("create table if not exists ingested (v int)")
            await conn.execute("insert into ingested values (%s)", (payload["v"],))
            return {"rows": 1}

        try:
            outcome.append(await ctx.succeed_in(write))
        except UnsupportedBackend:
            outcome.append("unsupported")
            return "plain"
        outcome.append(await ctx.succeed_in(write))  # already settled: no write

    task = await store.submit(name="ingest", payload={"v": 7})
    async with worker.background():
        (done,) = await finished(store, [task.id])
    if store.dialect == "sqlite":
        assert outcome == ["unsupported"] and done.result == "plain"
        return
    assert outcome[1] is None and outcome[0].status == "succeeded"
    assert done.result == {"rows": 1}
    import psycopg

    # The caller's table landed in the store's schema, committed with the task.
    schema = store.schema  # type: ignore[attr-defined]
    async with await psycopg.AsyncConnection.connect(request.getfixturevalue("pg_dsn")) as conn:
        cur = await conn.execute(f'select v from "{schema}".ingested')
        assert await cur.fetchall() == [(7,)]


async def test_lease_deadline_closes_the_local_gate_without_a_heartbeat(
    store: TaskStore,
) -> None:
    # Heartbeats far apart from a short lease: the lease runs out with no reply
    # saying so. Nothing of that attempt may be written any more (the same
    # worker re-claims the task), and the retry's result is the one that lands.
    worker = fast_worker(store, lease_ms=200, heartbeat_interval_ms=60_000, concurrency=2)
    seen: dict[int, object] = {}
    first_done = asyncio.Event()

    @worker.task
    async def slow(ctx):
        if ctx.attempt == 1:
            # Meanwhile: recovered and claimed again. Not much longer than the
            # lease: the retry must still hold its own 200 ms lease when it returns.
            await asyncio.sleep(0.3)
            try:
                await ctx.progress(0.5)
                seen[1] = "written"
            except LostLease:
                seen[1] = ("refused locally", ctx.lost_lease, ctx.lease_lost.is_set())
            first_done.set()
            return "attempt 1"
        # The retry holds the row (same worker id, live lease) while the stale
        # attempt tries to write: only the local gate can stop it.
        await asyncio.wait_for(first_done.wait(), 5)
        # The stale attempt's call is released once its return was settled (or
        # refused): then this call is the only one left.
        await eventually(lambda: len(worker.snapshot().calls) == 1)
        return f"attempt {ctx.attempt}"

    task = await store.submit(name="slow")
    async with worker.background():
        (done,) = await finished(store, [task.id])
    assert seen[1] == ("refused locally", True, True)
    assert done.status == "succeeded" and done.attempt == 2 and done.result == "attempt 2"


async def test_text_json_cannot_carry_is_escaped_and_the_failure_recorded(
    store: TaskStore,
) -> None:
    """A lone surrogate in an error, a progress message or a result never loses the attempt.

    Error envelopes and progress messages keep the text with the surrogate
    escaped visibly (``\\ud800``); a result that has no JSON form fails the
    attempt with a SerializationError envelope. Each settles once, by its own
    retry rule, while good tasks run beside them.
    """
    worker = fast_worker(store, concurrency=4, lease_ms=1_000)

    @worker.task
    async def permanent(ctx):
        raise TaskError("permanent: \ud800", type="Odd\udfff", details={"k\ud801": ["v\ud802"]})

    @worker.task
    async def flaky(ctx):
        raise RuntimeError(f"attempt {ctx.attempt} \ud800")

    @worker.task
    async def chatty(ctx):
        await ctx.progress(0.5, "half \ud800 way")
        return "ok"

    @worker.task
    async def odd_result(ctx):
        return {"text": "\ud800"}

    @worker.task
    async def gives_up(ctx):
        await ctx.fail("reason \ud800", retryable=False)

    @worker.task
    async def good(ctx, payload):
        return payload["i"]

    bad = [
        await store.submit(name="permanent", max_attempts=3),
        await store.submit(name="flaky", max_attempts=2),
        await store.submit(name="chatty"),
        await store.submit(name="odd_result", max_attempts=3),
        await store.submit(name="gives_up", max_attempts=3),
    ]
    goods = [await store.submit(name="good", payload={"i": i}) for i in range(12)]
    async with worker.background():
        done = await finished(store, [t.id for t in bad + goods])
    permanent_done, flaky_done, chatty_done, odd_done, gave_up = done[:5]
    assert [t.result for t in done[5:]] == list(range(12))

    assert (permanent_done.status, permanent_done.attempt) == ("failed", 1)
    assert permanent_done.error == {
        "type": "Odd\\udfff",
        "code": "task_error",
        "message": "permanent: \\ud800",
        "retryable": False,
        "details": {"k\\ud801": ["v\\ud802"]},
    }
    # Retryable: requeued once by its own rule, then failed with its own error.
    assert (flaky_done.status, flaky_done.attempt) == ("failed", 2)
    assert flaky_done.error["code"] == "handler_error"
    assert flaky_done.error["message"] == "attempt 2 \\ud800"
    assert (chatty_done.status, chatty_done.result) == ("succeeded", "ok")
    assert chatty_done.message == "half \\ud800 way"
    assert (odd_done.status, odd_done.attempt) == ("failed", 1)
    assert odd_done.error["type"] == "SerializationError"
    assert odd_done.error["code"] == "unserializable_result"
    assert (gave_up.status, gave_up.attempt) == ("failed", 1)
    assert gave_up.error["message"] == "reason \\ud800"
    assert not worker.snapshot().recent_errors  # no write failed along the way
