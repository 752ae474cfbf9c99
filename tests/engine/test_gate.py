"""The backpressure gate (docs/protocol-notes.md, "Client") on both dialects: QueueFull with nothing
enqueued, headroom coming back, child submits from handlers gated too.
"""

from __future__ import annotations

import asyncio

import pytest
from worker_support import finished

from engine import CairnQ, QueueFull, TaskStore, Worker
from engine._gate import QueueGate


@pytest.mark.parametrize("limit", [0, -1, True, 1.5, "3", {"q": 0}, {"q": False}, {"": 3}])
def test_gate_rejects_bad_limits(limit: object) -> None:
    with pytest.raises(ValueError):
        QueueGate(limit)  # type: ignore[arg-type]


def test_gate_rejects_negative_wait() -> None:
    with pytest.raises(ValueError):
        QueueGate(3, max_queue_wait_ms=-1)


async def test_queue_full_after_the_wait_with_nothing_enqueued(store: TaskStore) -> None:
    client = CairnQ(store, max_queue_depth={"small": 3}, max_queue_wait_ms=300)
    for i in range(3):
        await client.submit("job", {"i": i}, queue="small")
    for i in range(10):
        await client.submit("job", {"i": i}, queue="other")  # not gated
    with pytest.raises(QueueFull) as info:
        await client.submit("job", {"i": 99}, queue="small")
    assert (info.value.queue, info.value.max_depth) == ("small", 3)
    assert info.value.waited_ms >= 300
    assert (await client.stats("small"))["small"]["queued"] == 3


async def test_headroom_returning_admits_a_waiting_submit(store: TaskStore) -> None:
    client = CairnQ(store, max_queue_depth=2, max_queue_wait_ms=10_000)
    first = await client.submit("job")
    await client.submit("job")
    pending = asyncio.ensure_future(client.submit("job"))
    await asyncio.sleep(0.1)
    assert not pending.done()
    await client.cancel(first.id)  # a queued row leaves: headroom 1
    third = await asyncio.wait_for(pending, 5)
    assert third.status == "queued"


async def test_child_submits_from_handlers_pass_the_gate(store: TaskStore) -> None:
    worker = Worker(
        store,
        ["default"],
        poll_interval_ms=20,
        max_queue_depth={"children": 2},
        max_queue_wait_ms=200,
    )
    outcomes: list[str] = []

    @worker.task
    async def spawn(ctx):
        for i in range(3):
            try:
                await ctx.submit("child", {"i": i}, queue="children")
                outcomes.append("queued")
            except QueueFull:
                outcomes.append("full")

    task = await store.submit(name="spawn")
    async with worker.background():
        await finished(store, [task.id])
    assert outcomes == ["queued", "queued", "full"]


def grants(gate: QueueGate) -> dict[str, int]:
    """The allowance left per queue: submits that need no probe (no public window)."""
    with gate._lock:
        return dict(gate._grants)


async def test_one_probe_grants_up_to_64_submits(store: TaskStore) -> None:
    gate = QueueGate({"wide": 1_000, "narrow": 5})
    await gate.admit(store, "wide")
    await gate.admit(store, "narrow")
    await gate.admit(store, "ungated")
    # The probe's headroom, capped at 64, minus the submit that was admitted.
    assert grants(gate) == {"wide": 63, "narrow": 4}
    for _ in range(4):
        await gate.admit(store, "narrow")
    assert grants(gate)["narrow"] == 0


async def test_concurrent_submits_share_one_probe(
    store: TaskStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Submits that queue up behind a probe use its allowance instead of probing again."""
    probes: list[str] = []
    real = store.queue_depth

    async def counted(queue: str, max_depth: int) -> int:
        probes.append(queue)
        return await real(queue, max_depth)

    monkeypatch.setattr(store, "queue_depth", counted)
    gate = QueueGate({"wide": 1_000}, max_queue_wait_ms=0)
    await asyncio.gather(*(gate.admit(store, "wide") for _ in range(20)))
    assert probes == ["wide"]
    assert grants(gate)["wide"] == 64 - 20
