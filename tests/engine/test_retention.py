"""Retention (docs/protocol-notes.md, "Client"): rule validation, tiered rules, the first sweep only
after one interval, and the sweeper stopping with the client, on both dialects.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from worker_support import eventually

from engine import CairnQ, Retention, RetentionRule, TaskStore
from engine.store.sqlite import SQLiteStore


@pytest.fixture
def store(new_store: TaskStore) -> TaskStore:
    """Not connected: a retention sweeper starts with the store's connect."""
    return new_store


@pytest.mark.parametrize(
    "spec",
    [
        [],
        {},
        -1,
        True,
        "1000",
        {"queued": 10},
        [RetentionRule(10), "not a rule"],
    ],
)
def test_retention_rejects_bad_rules(spec: object) -> None:
    with pytest.raises(ValueError):
        Retention(spec)  # type: ignore[arg-type]


@pytest.mark.parametrize("kwargs", [{"interval_ms": 0}, {"limit": 0}, {"interval_ms": True}])
def test_retention_rejects_bad_schedule(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        Retention(1_000, **kwargs)


def test_rule_rejects_what_purge_would() -> None:
    with pytest.raises(ValueError):
        RetentionRule(-5)
    with pytest.raises(ValueError):
        RetentionRule(0, status="running")
    with pytest.raises(ValueError):
        RetentionRule(0, queue="")


def test_client_rejects_a_retention_of_the_wrong_type(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="retention"):
        CairnQ(SQLiteStore(tmp_path / "t.db"), retention="1h")  # type: ignore[arg-type]


def test_tiered_shapes_become_rules() -> None:
    assert Retention(5).rules == (RetentionRule(5),)
    by_status = Retention({"succeeded": 1, "failed": 2}).rules
    assert by_status == (RetentionRule(1, status="succeeded"), RetentionRule(2, status="failed"))
    rules = [RetentionRule(0, queue="q", name="n")]
    assert Retention(rules, interval_ms=5, limit=2).rules == tuple(rules)


async def test_sweeps_after_one_interval_by_tier(store: TaskStore) -> None:
    retention = Retention(
        [
            RetentionRule(0, status="succeeded", queue="fast"),
            RetentionRule(3_600_000, status="canceled"),
        ],
        # Long enough that the setup below (a dozen writes, slow on a loaded
        # machine) always ends before the first sweep.
        interval_ms=2_000,
        limit=2,
    )
    client = CairnQ(store, retention=retention)
    async with client:
        done = []
        for _ in range(5):
            task = await client.submit("job", queue="fast")
            (claimed,) = await store.claim(queues=["fast"], worker_id="worker_t")
            await store.complete(task_id=claimed.id, worker_id="worker_t")
            done.append(task.id)
        kept = await client.submit("job", queue="fast")
        await client.cancel(kept.id)  # canceled: kept for an hour
        await asyncio.sleep(0.05)
        # The first sweep waits one interval: nothing is gone yet.
        assert len(await client.list(queue="fast")) == 6

        async def gone() -> bool:
            return [await client.get(i) for i in done] == [None] * len(done)

        deadline = asyncio.get_running_loop().time() + 15
        while not await gone():
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.05)
        assert (await client.get(kept.id)) is not None  # batches of 2 drained all 5


async def test_close_stops_the_sweeper_and_errors_go_to_on_error(store: TaskStore) -> None:
    errors: list[BaseException] = []
    retention = Retention(0, interval_ms=30, on_error=errors.append)
    client = CairnQ(store, retention=retention)
    await client.connect()
    sweeper = client._sweeper  # no public window onto the sweeper's task
    assert sweeper is not None and sweeper.running
    await asyncio.sleep(0.1)
    await client.close()
    assert not sweeper.running
    assert errors == []


async def test_sweep_errors_are_reported_and_the_schedule_continues(store: TaskStore) -> None:
    errors: list[BaseException] = []
    retention = Retention(0, interval_ms=30, on_error=errors.append)
    client = CairnQ(store, retention=retention)
    await client.connect()
    try:
        await store.close()  # every purge now raises StoreClosed
        await eventually(lambda: len(errors) >= 2)
        assert type(errors[0]).__name__ == "StoreClosed"
    finally:
        await client.close()
