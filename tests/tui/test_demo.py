"""The built-in demo: a deterministic traffic plan, and the demo worker hosted for real
on SQLite and Postgres showing each feature it promises.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hosting_support import DIALECTS, eventually, status_of, store_factory

from cairnq_tui.demo import DemoSubmit, DemoTraffic, _draw, make_worker, submit_one, traffic_plan
from cairnq_tui.hosting import WorkerHost
from engine import CairnQ, TaskStore


def test_traffic_plan_is_fixed_by_its_seed_and_covers_every_feature() -> None:
    first = list(itertools.islice(traffic_plan(7), 600))
    assert first == list(itertools.islice(traffic_plan(7), 600))
    assert first != list(itertools.islice(traffic_plan(8), 600))
    names = {s.name for s in first}
    assert names == {
        "embed",
        "render",
        "compare",
        "publish",
        "index.update",
        "thumbnail",
        "fetch.flaky",
        "report.build",
        "notify",
    }
    keyed = [s for s in first if s.key is not None]
    assert {s.conflict for s in keyed} == {"reuse", "replace"}
    assert all(s.key.startswith("doc:") for s in keyed if s.key)
    assert any(s.delay_ms >= 5_000 for s in first)
    # Embeds come in bursts long enough to fill a batch of 32.
    runs = [len(list(g)) for k, g in itertools.groupby(first, key=lambda s: s.name) if k == "embed"]
    assert max(runs) >= 32


@pytest.fixture(params=DIALECTS)
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], TaskStore]:
    return store_factory(request, tmp_path)


@pytest.fixture
def demo_host(make_store: Callable[[], TaskStore]) -> Iterator[WorkerHost]:
    host = WorkerHost(["cairnq_tui.demo:make_worker"], make_store=make_store, target_text="unused")
    host.start()
    yield host
    host.shutdown(0.5)


async def test_demo_traffic_flows_through_the_hosted_demo_worker(
    make_store: Callable[[], TaskStore], demo_host: WorkerHost
) -> None:
    traffic = DemoTraffic(make_store, rate=400, seed=3)
    traffic.start()
    gpu_peak = 0
    async with CairnQ(make_store()) as client:
        try:

            async def flowing() -> bool:
                nonlocal gpu_peak
                snap = (await status_of(demo_host)).snapshot
                assert snap is not None
                gpu = next(r for r in snap.resources if r.name == "gpu")
                gpu_peak = max(gpu_peak, gpu.held)
                done = await client.list(status="succeeded", limit=1000)
                return {t.name for t in done} >= {"embed", "notify", "index.update", "render"}

            await eventually(flowing, what="demo tasks of several names to succeed")
        finally:
            traffic.stop()
        assert traffic.submitted > 0 and traffic.errors == 0
        embeds = await client.list(status="succeeded", name="embed", limit=200)
        assert max(t.result["batch"] for t in embeds) > 1
        assert gpu_peak <= 1
        planned = list(itertools.islice(traffic_plan(3), traffic.submitted))
        now = int(time.time() * 1000)
        queued = await client.list(status="queued", limit=1000)
        if any(s.delay_ms for s in planned):
            assert any(t.run_at_ms > now for t in queued)
        keys = {s.key for s in planned if s.key is not None}
        assert keys, "the plan's first submits hold a keyed index.update"
        resolved = [await client.get_by_key(k) for k in sorted(keys)]
        assert all(t is not None and t.name == "index.update" for t in resolved)
    status = await status_of(demo_host)
    assert status.state == "running"
    assert {n.name: n.batch for n in status.snapshot.names}["embed"] == 32


async def test_demo_handlers_are_deterministic_with_a_seed(
    make_store: Callable[[], TaskStore],
) -> None:
    seed = 11
    worker = make_worker(make_store(), seed=seed, concurrency=8, retry_backoff_ms=0)
    async with CairnQ(make_store()) as client, worker.background():
        tasks = {
            n: await submit_one(client, DemoSubmit("fetch.flaky", {"n": n}, max_attempts=4))
            for n in range(1, 9)
        }
        outcomes = set()
        for n, task in tasks.items():
            done = await client.wait(task.id, timeout_ms=20_000)
            first_success = next((a for a in range(1, 5) if _draw(seed, n, a, "fail") >= 0.5), None)
            if first_success is None:
                assert (done.status, done.attempt) == ("failed", 4)
            else:
                assert (done.status, done.attempt) == ("succeeded", first_success)
            outcomes.add(done.attempt)
        assert len(outcomes) > 1  # the seed gives this test both retries and first-time successes


async def test_draining_the_demo_worker_does_not_wait_on_its_own_children(
    make_store: Callable[[], TaskStore], demo_host: WorkerHost
) -> None:
    from cairnq_tui.widgets.hosted_view import worker_line

    async with CairnQ(make_store()) as client:
        # Fill the gpu so the publishes' renders queue behind it, then publish.
        for n in range(3):
            await client.submit("render", {"n": n}, queue="media")
        publishes = [
            await client.submit("publish", {"n": 100 + n}, queue="media") for n in range(4)
        ]

        async def publishing() -> bool:
            snap = (await status_of(demo_host)).snapshot
            return snap is not None and any(c.name == "publish" for c in snap.calls)

        await eventually(publishing, what="a publish call waiting on its render")
        hosted = demo_host.workers[0]
        drain = asyncio.ensure_future(hosted.drain())
        seen_draining = ""
        # Before, each waiting publish held the drain for its 60 s wait, then failed.
        deadline = time.monotonic() + 30
        while not drain.done() and time.monotonic() < deadline:
            status = await status_of(demo_host)
            if status.state == "draining":
                seen_draining = str(worker_line(status, True))
            await asyncio.sleep(0.05)
        assert drain.done(), "the drain still waits on calls the worker will never finish"
        await drain
        if seen_draining:
            assert "drain waits for" in seen_draining, seen_draining
        for task in publishes:
            done = await client.get(task.id)
            assert done is not None and done.status != "failed", done
