"""An operator's reschedules: "run now" and "delay by", on both dialects, against
tasks cairnq 0.15.1 submitted and a cairnq 0.15.1 worker that claims them.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from triage_support import DIALECTS, Shared, cairnq, open_shared

from engine import CairnQ, NotQueued, PostgresStore, SQLiteStore, StoreUnavailable, TaskStore

pytestmark = pytest.mark.peer

HOUR = 3_600_000


@pytest.fixture(params=DIALECTS)
async def shared(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Shared]:
    async for s in open_shared(request, tmp_path):
        yield s


def row(shared: Shared, task_id: str) -> tuple[str, int, int]:
    [found] = shared.sql(
        "select status, run_at_ms, updated_at_ms from cairnq_tasks where id = ?", (task_id,)
    )
    return found[0], int(found[1]), int(found[2])


async def test_run_now_lets_a_cairnq_worker_claim_a_delayed_task_at_once(shared: Shared) -> None:
    worker = cairnq.Worker(shared.peer.store, ["default"], concurrency=2, poll_interval_ms=100)
    ran: list[str] = []

    @worker.task
    async def report(ctx, payload):  # type: ignore[no-untyped-def]
        ran.append(ctx.task_id)
        return "sent"

    later = await shared.submit("report", delay_ms=HOUR)
    untouched = await shared.submit("report", delay_ms=HOUR)
    async with worker.background():
        before = time.time() * 1000
        moved = await shared.store.run_now(later)
        assert moved.id == later and moved.status == "queued"
        assert before - 5_000 <= moved.run_at_ms <= time.time() * 1000 + 5_000
        done = await shared.peer.wait(later, timeout_ms=30_000)
    assert done.status == "succeeded" and done.result == "sent"
    assert ran == [later]  # the other delayed task was left alone
    status, run_at, _ = row(shared, untouched)
    assert status == "queued" and run_at > time.time() * 1000 + HOUR / 2


async def test_run_now_keeps_an_earlier_due_time_and_delay_pushes_back(shared: Shared) -> None:
    due = await shared.submit("job", queue="idle")
    _, run_at, _ = row(shared, due)
    assert (await shared.store.run_now(due)).run_at_ms == run_at  # keeps its place
    client = CairnQ(shared.store)
    delayed = await client.delay(due, 10 * 60_000)
    assert delayed.run_at_ms >= run_at + 10 * 60_000
    # From its due time when that is still ahead: pushed back by the duration again.
    again = await shared.store.delay(due, 60_000)
    assert again.run_at_ms == delayed.run_at_ms + 60_000
    assert row(shared, due)[1] == again.run_at_ms
    back = await client.run_now(due)
    assert back.run_at_ms <= time.time() * 1000 + 5_000


async def test_reschedules_refuse_tasks_that_are_not_queued(shared: Shared) -> None:
    running = await shared.submit("job", queue="r")
    await shared.claim(queue="r")
    finished = await shared.succeed("job")
    failed = await shared.fail("job", "E", "boom")
    for task_id, status in ((running, "running"), (finished, "succeeded"), (failed, "failed")):
        before = row(shared, task_id)
        with pytest.raises(NotQueued, match=f"is {status}") as caught:
            await shared.store.run_now(task_id)
        assert caught.value.status == status and caught.value.task_id == task_id
        with pytest.raises(NotQueued, match=f"is {status}"):
            await shared.store.delay(task_id, 60_000)
        assert row(shared, task_id) == before  # nothing written
    with pytest.raises(NotQueued, match="no task") as unknown:
        await shared.store.run_now("task_01J00000000000000000000000")
    assert unknown.value.status is None


async def test_bad_delays_are_refused_before_anything_is_written(shared: Shared) -> None:
    task_id = await shared.submit("job", queue="idle", delay_ms=HOUR)
    before = row(shared, task_id)
    for bad in (0, -5, True, "1h", 1.5, None):
        with pytest.raises(ValueError, match="delay_ms"):
            await shared.store.delay(task_id, bad)  # type: ignore[arg-type]
    for bad_id in ("", None, 7):
        with pytest.raises(ValueError, match="task_id"):
            await shared.store.run_now(bad_id)  # type: ignore[arg-type]
    assert row(shared, task_id) == before


async def test_read_only_stores_refuse_reschedules(shared: Shared) -> None:
    task_id = await shared.submit("job", queue="idle", delay_ms=HOUR)
    finished = await shared.succeed("job")
    before = row(shared, task_id)
    reader: TaskStore
    if shared.schema is None:
        reader = SQLiteStore(shared.location, read_only=True)
    else:
        reader = PostgresStore(shared.location, schema=shared.schema, read_only=True, max_size=2)
    await reader.connect()
    try:
        with pytest.raises(StoreUnavailable, match="read"):
            await reader.run_now(task_id)
        with pytest.raises(StoreUnavailable, match="read"):
            await reader.delay(task_id, 60_000)
        with pytest.raises(StoreUnavailable, match="read"):
            await reader.purge_ids([finished])
    finally:
        await reader.close()
    assert row(shared, task_id) == before and row(shared, finished)[0] == "succeeded"


async def test_a_failure_group_is_shown_and_purged_by_its_ids(shared: Shared) -> None:
    group_ids = [await shared.fail("charge", "CardError", f"card {n} declined") for n in (1, 2, 3)]
    other = await shared.fail("charge", "CardError", "gateway closed")
    keyed = await shared.peer.submit("charge", {}, key="order-7", queue="k", max_attempts=1)
    await shared.claim(queue="k")
    error = {"type": "CardError", "code": "x", "message": "card 7 declined", "retryable": False}
    await shared.peer.store.fail(task_id=keyed.id, worker_id="w1", error={**error, "details": {}})
    group_ids.append(keyed.id)
    running = await shared.submit("charge", queue="r")
    await shared.claim(queue="r")

    groups = await shared.inspector.failure_groups(window_ms=HOUR)
    [group] = [g for g in groups.groups if g.message == "card <n> declined"]
    selection = await shared.inspector.failure_selection(group, window_ms=HOUR)
    assert selection.count == 4 and set(selection.task_ids) == set(group_ids)
    shown = await shared.inspector.summaries(selection.task_ids)
    assert [r.id for r in shown] == sorted(group_ids, reverse=True)
    assert {r.error_message for r in shown} == {f"card {n} declined" for n in (1, 2, 3, 7)}

    unknown = "task_01J00000000000000000000000"
    deleted = await shared.store.purge_ids([*selection.task_ids, running, unknown])
    assert sorted(deleted) == sorted(group_ids)
    left = {r[0] for r in shared.sql("select id from cairnq_tasks")}
    assert not left & set(group_ids) and {other, running} <= left
    assert shared.sql("select count(*) from cairnq_task_keys where key = 'order-7'") == [(0,)]
    assert await shared.store.purge_ids([]) == []
    for bad in ("task_1", [""], [None], ["task_1"] * 10_001):
        with pytest.raises(ValueError, match="task_id"):
            await shared.store.purge_ids(bad)  # type: ignore[arg-type]
    assert {r[0] for r in shared.sql("select id from cairnq_tasks")} == left
