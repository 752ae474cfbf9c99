"""``cairnq-tui demo``: a worker that exercises every scheduling feature, and traffic for it.

The worker (``make_worker``, hosted like any ``--worker``) registers:

- ``embed`` — batched, 32 tasks per call;
- ``render`` and ``compare`` — sharing the ``gpu`` resource of capacity 1, so
  one holds it and the other waits (the lock view);
- ``index.update`` — on the ``index`` resource (capacity 2), submitted under
  ``doc:N`` keys with ``reuse`` and sometimes ``replace``;
- ``thumbnail`` — its own concurrency cap of 2, slow enough to hit it;
- ``fetch.flaky`` — fails about half of its attempts and retries with backoff;
- ``report.build`` — slow, reports progress step by step;
- ``publish`` — submits a child ``render`` and waits for it (a handler wait), but
  not through a drain: this worker would be the one to run the render;
- ``notify`` — quick, sometimes delayed by several seconds.

``traffic_plan(seed)`` is the submit sequence, a pure function of its seed, and
every handler's duration and failure is drawn from (seed, the task's sequence
number, attempt): with a seed, the demo is the same demo every time.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from engine import (
    CairnQ,
    CairnQError,
    Conflict,
    Task,
    TaskContext,
    TaskStore,
    TaskTimeout,
    Worker,
)

QUEUES = ("default", "media", "search")
RESOURCES = {"gpu": 1, "index": 2}
DEFAULT_RATE = 20.0
KEYS = 8
#: ``publish`` waits on its render in steps of this long, for at most 60 s in all.
PUBLISH_STEP_MS = 500
PUBLISH_WAIT_STEPS = 120


@dataclass(frozen=True, slots=True)
class DemoSubmit:
    """One submit of the traffic plan."""

    name: str
    payload: dict[str, Any]
    queue: str = "default"
    key: str | None = None
    conflict: Conflict = "reuse"
    delay_ms: int = 0
    max_attempts: int = 3
    priority: int = 0


def _draw(seed: int | None, n: int, attempt: int, what: str) -> float:
    """A number in [0, 1) fixed by (seed, sequence number, attempt, purpose)."""
    if seed is None:
        return random.random()
    return random.Random(f"{seed}:{n}:{attempt}:{what}").random()


def _between(low: float, high: float, unit: float) -> float:
    return low + (high - low) * unit


def make_worker(
    store: TaskStore,
    *,
    seed: int | None = None,
    concurrency: int = 16,
    retry_backoff_ms: int = 500,
) -> Worker:
    """The demo worker on ``store``.

    Args:
        store: the database (the console's).
        seed: fixes every handler's duration and failure; None for random.
        concurrency: calls in flight at once.
        retry_backoff_ms: the retry backoff's base (capped at 4 s).

    Returns:
        An unstarted ``Worker`` claiming from ``QUEUES``.
    """
    worker = Worker(
        store,
        list(QUEUES),
        concurrency=concurrency,
        lease_ms=10_000,
        poll_interval_ms=200,
        retry_backoff_ms=retry_backoff_ms,
        retry_backoff_max_ms=4_000,
        resources=RESOURCES,
    )

    async def pause(ctx: TaskContext, what: str, low: float, high: float) -> None:
        n = int(ctx.payload.get("n", 0)) if isinstance(ctx.payload, dict) else 0
        await asyncio.sleep(_between(low, high, _draw(seed, n, ctx.attempt, what)))

    @worker.task("embed", batch=32)
    async def embed(batch: list[TaskContext]) -> dict[str, Any]:
        await pause(batch[0], "embed", 0.05, 0.25)
        return {ctx.task_id: {"dims": 384, "batch": len(batch)} for ctx in batch}

    @worker.task("render", resource="gpu")
    async def render(ctx: TaskContext, payload: dict[str, Any]) -> dict[str, Any]:
        await pause(ctx, "render", 0.8, 2.0)
        return {"frames": 24, "scene": payload.get("scene")}

    @worker.task("compare", resource="gpu")
    async def compare(ctx: TaskContext, payload: dict[str, Any]) -> dict[str, Any]:
        await pause(ctx, "compare", 0.4, 1.0)
        return {"similarity": round(_draw(seed, payload.get("n", 0), 0, "similarity"), 3)}

    @worker.task("index.update", resource="index")
    async def index_update(ctx: TaskContext, payload: dict[str, Any]) -> dict[str, Any]:
        await pause(ctx, "index", 0.1, 0.4)
        return {"doc": payload.get("doc"), "revision": payload.get("revision")}

    @worker.task("thumbnail", concurrency=2)
    async def thumbnail(ctx: TaskContext, payload: dict[str, Any]) -> dict[str, Any]:
        await pause(ctx, "thumbnail", 1.5, 3.0)
        return {"size": "256x256"}

    @worker.task("fetch.flaky")
    async def fetch_flaky(ctx: TaskContext, payload: dict[str, Any]) -> dict[str, Any]:
        await pause(ctx, "fetch", 0.05, 0.2)
        if _draw(seed, payload.get("n", 0), ctx.attempt, "fail") < 0.5:
            raise ConnectionError(
                f"upstream {payload.get('url')} timed out (attempt {ctx.attempt})"
            )
        return {"status": 200}

    @worker.task("report.build")
    async def report_build(ctx: TaskContext, payload: dict[str, Any]) -> dict[str, Any]:
        steps = 12
        for step in range(1, steps + 1):
            await pause(ctx, f"report-{step}", 0.3, 0.6)
            if await ctx.canceled():
                return {"stopped_at": step}
            await ctx.progress(step / steps, f"section {step} of {steps}")
        return {"pages": steps * 4}

    @worker.task("publish")
    async def publish(ctx: TaskContext, payload: dict[str, Any]) -> dict[str, Any]:
        child = await ctx.submit("render", {"n": payload.get("n", 0), "scene": "cover"})
        # The render is this worker's own work: once the worker drains (or stops) it
        # will never claim it, so waiting on would only hold the drain for the full
        # timeout and then fail. Wait in short steps and, when the worker no longer
        # claims, finish without the render (it stays queued for the next run).
        for _ in range(PUBLISH_WAIT_STEPS):
            try:
                done = await ctx.wait(child.id, timeout_ms=PUBLISH_STEP_MS, poll_ms=100)
            except TaskTimeout:
                if worker.snapshot().state in ("draining", "stopped"):
                    return {"render": child.id, "status": "not waited: the worker is draining"}
                continue
            return {"render": done.id, "status": done.status}
        raise TaskTimeout(child.id, timeout_ms=PUBLISH_STEP_MS * PUBLISH_WAIT_STEPS)

    @worker.task("notify")
    async def notify(ctx: TaskContext, payload: dict[str, Any]) -> None:
        await pause(ctx, "notify", 0.01, 0.05)

    return worker


def traffic_plan(seed: int | None = None) -> Iterator[DemoSubmit]:
    """The endless submit sequence; the same for the same seed.

    Each step numbers its payloads (``n``) so handlers can draw their behaviour.
    """
    rng = random.Random(seed)
    n = 0
    revisions = [0] * KEYS
    kinds = ["embed", "notify", "index", "thumbnail", "flaky", "gpu", "delayed", "report"]
    weights = [12, 18, 14, 12, 10, 12, 5, 1]
    while True:
        n += 1
        kind = rng.choices(kinds, weights)[0]
        if kind == "embed":
            # Bursts, so one call gets a full batch of 32 now and then.
            for _ in range(rng.randint(8, 40)):
                yield DemoSubmit("embed", {"n": n, "text": f"chunk {n}"}, queue="search")
                n += 1
        elif kind == "notify":
            yield DemoSubmit("notify", {"n": n, "to": f"user{rng.randint(1, 99)}"})
        elif kind == "index":
            doc = rng.randrange(KEYS)
            revisions[doc] += 1
            # Mostly reuse (a duplicate update is absorbed); a new revision replaces.
            conflict: Conflict = "replace" if rng.random() < 0.3 else "reuse"
            update = {"n": n, "doc": doc, "revision": revisions[doc]}
            # Some updates are deferred, so a follower of the key sees it replaced.
            delay = rng.choice([0, 0, 0, 4_000, 8_000])
            yield DemoSubmit(
                "index.update",
                update,
                queue="search",
                key=f"doc:{doc}",
                conflict=conflict,
                delay_ms=delay,
            )
        elif kind == "thumbnail":
            yield DemoSubmit("thumbnail", {"n": n, "image": f"img-{n}.png"}, queue="media")
        elif kind == "flaky":
            fetch = {"n": n, "url": f"https://example.invalid/{n}"}
            yield DemoSubmit("fetch.flaky", fetch, max_attempts=4)
        elif kind == "gpu":
            name = rng.choice(["render", "render", "compare", "publish"])
            yield DemoSubmit(name, {"n": n, "scene": f"scene-{n % 5}"}, queue="media")
        elif kind == "delayed":
            delay = rng.randint(5, 30) * 1_000
            yield DemoSubmit("notify", {"n": n, "to": "later"}, delay_ms=delay, priority=1)
        else:
            yield DemoSubmit("report.build", {"n": n, "month": f"2026-{rng.randint(1, 12):02d}"})


async def submit_one(client: CairnQ, item: DemoSubmit) -> Task:
    """Submit one planned task (an ``AlreadyExists`` cannot happen: no ``reject``)."""
    return await client.submit(
        item.name,
        item.payload,
        key=item.key,
        queue=item.queue,
        conflict=item.conflict,
        delay_ms=item.delay_ms,
        max_attempts=item.max_attempts,
        priority=item.priority,
    )


class DemoTraffic:
    """Submits ``traffic_plan`` at ``rate`` tasks per second from its own thread and loop,
    and now and then follows a ``doc:N`` key with ``wait_by_key`` (a wait the Waits view shows).

    Args:
        make_store: a new, unconnected store on the demo database.
        rate: tasks per second (bursts are paid back by a longer pause).
        seed: fixes the plan.
    """

    def __init__(
        self,
        make_store: Callable[[], TaskStore],
        *,
        rate: float = DEFAULT_RATE,
        seed: int | None = None,
    ) -> None:
        if not rate > 0:
            raise ValueError(f"rate must be > 0 tasks per second, got {rate!r}")
        self._make_store = make_store
        self._rate = rate
        self._seed = seed
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, name="cairnq-demo-traffic", daemon=True)
        self._stop: asyncio.Event | None = None
        self.submitted = 0
        self.errors = 0

    def start(self) -> None:
        """Start submitting (returns at once)."""
        self._thread.start()

    def stop(self) -> None:
        """Stop submitting and wait for the thread to end."""
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._request_stop)
            self._thread.join(10)

    def _request_stop(self) -> None:
        if self._stop is not None:
            self._stop.set()

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._main())
        finally:
            self._loop.close()

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        followers: set[asyncio.Task[None]] = set()
        rng = random.Random(self._seed)
        async with CairnQ(self._make_store()) as client:
            for i, item in enumerate(traffic_plan(self._seed)):
                if self._stop.is_set():
                    break
                try:
                    await submit_one(client, item)
                    self.submitted += 1
                except CairnQError:
                    self.errors += 1  # a busy database: the next submit tries again
                if item.key is not None and len(followers) < 2 and rng.random() < 0.2:
                    follower = asyncio.ensure_future(self._follow(client, item.key))
                    followers.add(follower)
                    follower.add_done_callback(followers.discard)
                if i % 8 == 7:  # pace in small groups: fewer, longer sleeps
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._stop.wait(), 8 / self._rate)
            for follower in list(followers):
                follower.cancel()
            await asyncio.gather(*followers, return_exceptions=True)

    async def _follow(self, client: CairnQ, key: str) -> None:
        with contextlib.suppress(CairnQError):
            await client.wait_by_key(key, timeout_ms=20_000)
