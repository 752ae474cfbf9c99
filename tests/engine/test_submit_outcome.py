"""A submit says what it did, the same way on both dialects.

``submit_outcome`` answers created / reused / replaced with the task (and the
key's previous holder), decided by the one conflict table above the dialects;
``AlreadyExists`` carries the holder's id and status on both dialects.
"""

from __future__ import annotations

import pytest
from store_support import Database

from engine import AlreadyExists, CairnQ, TaskStore


async def test_an_unkeyed_submit_is_created(store: TaskStore) -> None:
    outcome = await store.submit_outcome(name="job", payload={"i": 1})
    assert outcome.action == "created" and outcome.previous is None and not outcome.canceled
    assert outcome.task == await store.get(outcome.task.id)


@pytest.mark.parametrize("conflict", ["reuse", "reuse-succeeded", "reject", "replace"])
async def test_a_free_key_is_created_whatever_the_conflict(store: TaskStore, conflict: str) -> None:
    outcome = await store.submit_outcome(name="job", key="k", conflict=conflict)
    assert (outcome.action, outcome.previous) == ("created", None)
    assert (await store.get_by_key("k")) == outcome.task


async def test_reuse_hands_back_the_live_holder(store: TaskStore, database: Database) -> None:
    first = await store.submit(name="job", key="k")
    outcome = await store.submit_outcome(name="job", key="k", conflict="reuse")
    assert (outcome.action, outcome.task, outcome.previous) == ("reused", first, None)
    assert database.rows("select count(*) from cairnq_tasks") == [(1,)]


async def test_reuse_succeeded_reuses_a_succeeded_holder_only(store: TaskStore) -> None:
    first = await store.submit(name="job", key="k")
    [claimed] = await store.claim(queues=["default"], worker_id="w")
    done = await store.complete(task_id=claimed.id, worker_id="w", result={"r": 1})
    outcome = await store.submit_outcome(name="job", key="k", conflict="reuse-succeeded")
    assert (outcome.action, outcome.task) == ("reused", done)
    # A plain reuse of a finished task makes a new one: the key moves.
    again = await store.submit_outcome(name="job", key="k", conflict="reuse")
    assert again.action == "replaced" and again.task.id != first.id
    assert again.previous == done and not again.canceled


async def test_replace_cancels_a_live_holder_and_says_so(store: TaskStore) -> None:
    first = await store.submit(name="job", key="k")
    client = CairnQ(store)
    outcome = await client.submit_outcome("job", {"v": 2}, key="k", conflict="replace")
    assert outcome.action == "replaced" and outcome.canceled
    assert outcome.previous is not None
    assert (outcome.previous.id, outcome.previous.status) == (first.id, "canceled")
    assert outcome.task.status == "queued" and outcome.task.payload == {"v": 2}
    assert (await store.get_by_key("k")) == outcome.task
    # The canceled holder's waiters hear of it from the submit itself.
    assert (await client.wait(first.id, timeout_ms=5_000)).status == "canceled"


async def test_already_exists_names_the_holder_on_both_dialects(store: TaskStore) -> None:
    held = await store.submit(name="job", key="k")
    for call in (
        store.submit(name="job", key="k", conflict="reject"),
        store.submit_outcome(name="job", key="k", conflict="reject"),
        CairnQ(store).submit_outcome("job", key="k", conflict="reject"),
    ):
        with pytest.raises(AlreadyExists) as info:
            await call
        assert (info.value.key, info.value.task_id, info.value.status) == ("k", held.id, "queued")
    await store.cancel(held.id)
    with pytest.raises(AlreadyExists) as info:
        await store.submit(name="job", key="k", conflict="reject")
    assert (info.value.task_id, info.value.status) == (held.id, "canceled")
