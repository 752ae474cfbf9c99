"""Claim sessions with per-name quotas (docs/protocol-notes.md, "Worker"), on both dialects.

Concurrency is observed with real handlers recording how many calls overlap.
The pure planner (``plan_poll``) is also exercised directly with a recording
draw, to pin down rotation and the per-poll resource tally exactly.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
from worker_support import Overlap, finished, submit_many

from engine import Task, TaskStore, Worker
from engine._worker_plan import InFlight, Source, plan_poll


def fake_task(name: str, i: int) -> Task:
    return Task(
        id=f"task_{name}_{i}", name=name, queue="default", status="running", payload={},
        metadata={}, result=None, error=None, progress=None, message=None, attempt=1,
        max_attempts=3, priority=0, worker_id="w", lease_until_ms=None, run_at_ms=0,
        cancel_requested_at_ms=None, parent_id=None, root_id=None, correlation_id=None,
        created_at_ms=0, updated_at_ms=0, completed_at_ms=None,
    )  # fmt: skip


class RecordingDraw:
    """A draw that hands out as many fabricated rows as asked, and records each ask."""

    def __init__(self, available: dict[str, int]) -> None:
        self.available = dict(available)
        self.asks: list[tuple[tuple[str, ...], int]] = []
        self.counter = 0

    async def __call__(self, names: Sequence[str] | None, limit: int) -> list[Task]:
        assert names is not None
        self.asks.append((tuple(names), limit))
        out = []
        for name in names:
            while len(out) < limit and self.available.get(name, 0) > 0:
                self.available[name] -= 1
                self.counter += 1
                out.append(fake_task(name, self.counter))
        return out


async def test_plan_rotates_start_and_shares_unbatched_names() -> None:
    sources = (
        Source(("bulk",), 4, None, None),
        Source(("a", "b"), 1, None, None),
    )
    empty = InFlight({}, {})
    for start, first in ((0, ("bulk",)), (1, ("a", "b"))):
        draw = RecordingDraw({"bulk": 100, "a": 100, "b": 100})
        result = await plan_poll(draw, sources, start, 3, empty, {}, None, {"bulk": 4})
        assert draw.asks[0] == (first, 12 if first == ("bulk",) else 3)
        assert len(result.calls) == 3  # the first source took every free slot
        assert result.outcomes[1].shortfall == "worker full"


async def test_plan_resource_headroom_counts_this_polls_draws() -> None:
    sources = (Source(("x",), 1, None, "gpu"), Source(("y",), 2, None, "gpu"))
    draw = RecordingDraw({"x": 10, "y": 10})
    result = await plan_poll(
        draw, sources, 0, 8, InFlight({}, {"gpu": 1}), {"gpu": 3}, None, {"y": 2}
    )
    # capacity 3, one unit held: x gets 2 calls, y then has no headroom left.
    assert draw.asks == [(("x",), 2)]
    assert [o.shortfall for o in result.outcomes] == ["resource saturated", "resource saturated"]


async def test_plan_own_cap_and_claim_batch_ceilings() -> None:
    sources = (Source(("capped",), 1, 2, None), Source(("big",), 10, None, None))
    draw = RecordingDraw({"capped": 10, "big": 100})
    result = await plan_poll(draw, sources, 0, 8, InFlight({"capped": 1}, {}), {}, 4, {"big": 10})
    # own cap 2 minus 1 in flight; claim_batch 4 // batch 10 still allows one call.
    assert draw.asks == [(("capped",), 1), (("big",), 10)]
    assert [o.shortfall for o in result.outcomes] == ["own cap", "claim batch"]


def bulk_and_single_worker(store: TaskStore) -> tuple[Worker, Overlap]:
    """A worker with a batched name ``bulk`` (batch=4) and an unbatched ``single``;
    ``seen.order`` records the name of every call in the order they start."""
    worker = Worker(store, ["default"], concurrency=2, poll_interval_ms=20, lease_ms=5_000)
    seen = Overlap()

    @worker.task(batch=4)
    async def bulk(ctxs: list) -> None:
        seen.order.append("bulk")
        await asyncio.sleep(0.01)

    @worker.task
    async def single(ctx) -> None:
        seen.order.append("single")
        await asyncio.sleep(0.01)

    return worker, seen


async def test_batch_name_never_starves_unbatched_one(store: TaskStore) -> None:
    worker, seen = bulk_and_single_worker(store)
    ids = await submit_many(store, "bulk", 80) + await submit_many(store, "single", 6)
    async with worker.background():
        await finished(store, ids)
    # 20 bulk calls exist; rotation must interleave the singles well before the end.
    assert seen.order.count("single") == 6
    last_single = max(i for i, n in enumerate(seen.order) if n == "single")
    assert last_single < len(seen.order) - 8


async def test_unbatched_backlog_never_starves_batch_name(store: TaskStore) -> None:
    worker, seen = bulk_and_single_worker(store)
    ids = await submit_many(store, "single", 60) + await submit_many(store, "bulk", 8)
    async with worker.background():
        await finished(store, ids)
    assert seen.order.count("bulk") == 2
    last_bulk = max(i for i, n in enumerate(seen.order) if n == "bulk")
    assert last_bulk < 20


@pytest.mark.parametrize("capacity", [1, 2])
async def test_resource_caps_calls_across_names_and_batches(
    store: TaskStore, capacity: int
) -> None:
    worker = Worker(
        store, ["default"], concurrency=6, poll_interval_ms=20, resources={"gpu": capacity}
    )
    seen = Overlap()
    snapshots = []

    @worker.task(resource="gpu", batch=3)
    async def render(ctxs: list) -> None:
        snapshots.append(worker.snapshot())
        await seen.hold(0.03, "gpu", "render")

    @worker.task(resource="gpu")
    async def encode(ctx) -> None:
        await seen.hold(0.03, "gpu")

    @worker.task
    async def free(ctx) -> None:
        await seen.hold(0.03, "free")

    ids = (
        await submit_many(store, "render", 12)
        + await submit_many(store, "encode", 6)
        + await submit_many(store, "free", 8)
    )
    async with worker.background():
        tasks = await finished(store, ids)
    assert all(t.status == "succeeded" for t in tasks)
    assert seen.peak["gpu"] == capacity  # reached, never exceeded
    assert seen.peak["free"] >= 2  # unconstrained work ran beside the resource
    gpu = [r for s in snapshots for r in s.resources if r.name == "gpu"]
    assert all(r.held <= capacity and len(r.holders) == r.held for r in gpu)
    assert any(h.name == "render" and len(h.task_ids) >= 1 for r in gpu for h in r.holders)


async def test_no_resource_overshoot_within_one_poll(store: TaskStore) -> None:
    # Two names on one unit, both with a backlog: whichever draws first in a
    # poll must leave the other nothing, or two calls would share the unit.
    worker = Worker(store, ["default"], concurrency=8, poll_interval_ms=20, resources={"io": 1})
    seen = Overlap()
    shortfalls: list[str | None] = []

    async def hold(ctx) -> None:
        snap = worker.snapshot()
        shortfalls.extend(n.shortfall for n in snap.names)
        await seen.hold(0.02, "io")

    worker.register("left", hold, resource="io")
    worker.register("right", hold, resource="io")
    ids = await submit_many(store, "left", 5) + await submit_many(store, "right", 5)
    async with worker.background():
        await finished(store, ids)
    assert seen.peak["io"] == 1
    assert "resource saturated" in shortfalls


async def test_per_name_concurrency_counts_calls(store: TaskStore) -> None:
    worker = Worker(store, ["default"], concurrency=6, poll_interval_ms=20)
    seen = Overlap()

    @worker.task(concurrency=2)
    async def capped(ctx) -> None:
        await seen.hold(0.03, "capped")

    @worker.task(concurrency=1, batch=2)
    async def pairs(ctxs: list) -> None:
        await seen.hold(0.03, "pairs")

    @worker.task
    async def other(ctx) -> None:
        await seen.hold(0.03, "other")

    ids = (
        await submit_many(store, "capped", 10)
        + await submit_many(store, "pairs", 8)
        + await submit_many(store, "other", 10)
    )
    async with worker.background():
        await finished(store, ids)
        snap = worker.snapshot()
    assert seen.peak["capped"] == 2
    assert seen.peak["pairs"] == 1  # one call of up to two tasks at a time
    assert seen.peak["other"] >= 2
    by_name = {n.name: n for n in snap.names}
    assert by_name["capped"].concurrency == 2 and by_name["pairs"].batch == 2


async def test_claim_batch_caps_rows_per_draw(store: TaskStore) -> None:
    worker = Worker(store, ["default"], concurrency=8, claim_batch=2, poll_interval_ms=20)
    sizes: list[int] = []

    @worker.task(batch=5)
    async def chunk(ctxs: list) -> None:
        sizes.append(len(ctxs))

    ids = await submit_many(store, "chunk", 12)
    async with worker.background():
        await finished(store, ids)
    # claim_batch 2 < batch 5: still one full call per draw, never padded.
    assert sum(sizes) == 12 and max(sizes) == 5 and all(s >= 1 for s in sizes)
