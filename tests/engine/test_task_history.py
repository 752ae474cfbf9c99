"""Sorted and time-ranged task lists, metrics from the retained rows, and workers as
the rows show them, on databases cairnq 0.15.1 wrote, both dialects.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from triage_support import DIALECTS, Shared, open_shared

from engine.inspection import Inspector, TaskFilter

pytestmark = pytest.mark.peer

COLUMN = {
    "created": "created_at_ms",
    "due": "run_at_ms",
    "updated": "updated_at_ms",
    "completed": "completed_at_ms",
}
HOUR = 3_600_000


@pytest.fixture(params=DIALECTS)
async def shared(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Shared]:
    async for s in open_shared(request, tmp_path):
        yield s


async def fill(shared: Shared) -> list[str]:
    """18 tasks: due times spread over hours either way, some finished out of order."""
    ids = []
    for i in range(18):
        delay = ((i * 7) % 5) * HOUR
        ids.append(
            await shared.submit(
                "rare" if i in (4, 11) else f"n{i % 2}",
                queue="q",
                delay_ms=delay,
                max_attempts=1,
            )
        )
    # Finish some in an order unlike creation: claim what is due, complete / fail.
    due = await shared.peer.store.claim(queues=["q"], worker_id="w", lease_ms=60_000, limit=8)
    for j, task in enumerate(reversed(due)):
        if j % 2:
            await shared.peer.store.complete(task_id=task.id, worker_id="w", result=None)
        else:
            error = {"type": "E", "code": "x", "message": "m", "retryable": False, "details": {}}
            await shared.peer.store.fail(task_id=task.id, worker_id="w", error=error)
        await asyncio.sleep(0.002)
    # Spread the times so that every order differs from id order.
    for n, task_id in enumerate(ids):
        shared.sql(
            "update cairnq_tasks set updated_at_ms = updated_at_ms + ?, "
            "run_at_ms = run_at_ms - ? where id = ?",
            ((n * 37) % 11 * 1000, (n * 13) % 7 * 1000, task_id),
        )
    return ids


def expected(
    shared: Shared, sort: str, desc: bool, where: str = "1 = 1", params: Any = ()
) -> list[str]:
    col = COLUMN[sort]
    extra = f" and {col} is not null" if sort == "completed" else ""
    order = "desc" if desc else "asc"
    key = "id" if sort == "created" else f"{col} {order}, id"
    rows = shared.sql(
        f"select id from cairnq_tasks where {where}{extra} order by {key} {order}", params
    )
    return [r[0] for r in rows]


async def walk(inspector: Inspector, flt: TaskFilter, limit: int = 4) -> list[list[str]]:
    pages, cursor = [], None
    while True:
        page = await inspector.tasks_page(flt, before=cursor, limit=limit)
        pages.append([r.id for r in page.rows])
        if not page.has_next:
            return pages
        cursor = page.last_cursor


@pytest.mark.parametrize("sort", ["created", "due", "updated", "completed"])
@pytest.mark.parametrize("desc", [True, False], ids=["desc", "asc"])
async def test_each_sort_walks_every_task_both_ways(shared: Shared, sort: str, desc: bool) -> None:
    await fill(shared)
    flt = TaskFilter(sort=sort, descending=desc)  # type: ignore[arg-type]
    pages = await walk(shared.inspector, flt)
    assert [i for p in pages for i in p] == expected(shared, sort, desc)
    # Back through the cursors: each earlier page comes back whole.
    last = await shared.inspector.tasks_page(flt, limit=4)
    cursor, seen = last.last_cursor, [[r.id for r in last.rows]]
    for _ in range(len(pages) - 1):
        page = await shared.inspector.tasks_page(flt, before=cursor, limit=4)
        seen.append([r.id for r in page.rows])
        cursor = page.last_cursor
    for index in range(len(pages) - 1, 0, -1):
        page = await shared.inspector.tasks_page(
            flt, after=_first_cursor(shared, flt, pages[index]), limit=4
        )
        assert [r.id for r in page.rows] == pages[index - 1]


def _first_cursor(shared: Shared, flt: TaskFilter, ids: list[str]) -> str:
    if flt.sort == "created":
        return ids[0]
    [(ms,)] = shared.sql(f"select {COLUMN[flt.sort]} from cairnq_tasks where id = ?", (ids[0],))
    return f"{ms}:{ids[0]}"


@pytest.mark.parametrize("sort", ["created", "due", "updated", "completed"])
async def test_time_ranges_keep_the_tasks_within(shared: Shared, sort: str) -> None:
    await fill(shared)
    col = COLUMN[sort]
    times = sorted(
        t for (t,) in shared.sql(f"select {col} from cairnq_tasks where {col} is not null")
    )
    since, until = times[len(times) // 4], times[3 * len(times) // 4]
    flt = TaskFilter(sort=sort, since_ms=since, until_ms=until)  # type: ignore[arg-type]
    got = [i for p in await walk(shared.inspector, flt) for i in p]
    if sort == "created":
        # Creation is the id's millisecond (a ULID), the clock that minted the id.
        every = [r[0] for r in shared.sql("select id from cairnq_tasks order by id desc")]
        assert got == [i for i in every if since <= _id_ms(i) < until] and got
        return
    want = expected(shared, sort, True, f"{col} >= ? and {col} < ?", (since, until))
    assert got == want and want
    with_filter = TaskFilter(sort=sort, since_ms=since, name="n1")  # type: ignore[arg-type]
    got = [i for p in await walk(shared.inspector, with_filter) for i in p]
    assert got == expected(shared, sort, True, f"{col} >= ? and name = 'n1'", (since,))


def _id_ms(task_id: str) -> int:
    digits = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
    value = 0
    for ch in task_id[5:15]:
        value = value * 32 + digits.index(ch)
    return value


@pytest.mark.parametrize("sort", ["due", "updated"])
async def test_window_sorts_say_what_they_sorted(shared: Shared, sort: str) -> None:
    await fill(shared)
    narrow = Inspector(shared.store, payload_scan=5, count_cap=5)
    page = await narrow.tasks_page(TaskFilter(sort=sort), limit=50)  # type: ignore[arg-type]
    assert page.window_note == "sorted the newest 5 matching tasks"
    newest = [r[0] for r in shared.sql("select id from cairnq_tasks order by id desc limit 5")]
    assert sorted(r.id for r in page.rows) == sorted(newest)
    # A selective filter is read whole through its index, then ordered.
    rare = await narrow.tasks_page(TaskFilter(sort=sort, name="rare"), limit=50)  # type: ignore[arg-type]
    assert rare.window_note is None
    assert [r.id for r in rare.rows] == expected(shared, sort, True, "name = 'rare'")


# -- metrics ----------------------------------------------------------------------------


async def test_metrics_count_and_time_what_a_cairnq_worker_finished(shared: Shared) -> None:
    from triage_support import cairnq

    worker = cairnq.Worker(shared.peer.store, ["mail", "bill"], concurrency=4, poll_interval_ms=20)

    @worker.task
    async def send(ctx, payload):  # type: ignore[no-untyped-def]
        await asyncio.sleep(payload["sleep"])
        if payload["fail"]:
            raise RuntimeError("smtp down")

    ids = []
    for i in range(12):
        payload = {"sleep": (i % 4) * 0.01, "fail": i % 3 == 0}
        queue = "mail" if i % 2 else "bill"
        ids.append(await shared.submit("send", payload=payload, queue=queue, max_attempts=1))
    async with worker.background():
        for task_id in ids:
            await shared.peer.wait(task_id, timeout_ms=20_000)
    old = await shared.succeed("send", queue="mail")
    shared.age(old, 2 * HOUR)  # outside a one-hour window

    m = await shared.inspector.metrics(window_ms=HOUR)
    assert m.bucket_ms == 60_000 and not m.capped
    assert not m.estimated and m.completions == 12 and m.note == ""
    assert {(s.queue, s.name) for s in m.series} == {("bill", "send"), ("mail", "send")}
    for s in m.series:
        rows = shared.sql(
            "select status, completed_at_ms - run_at_ms from cairnq_tasks "
            "where queue = ? and id <> ?",
            (s.queue, old),
        )
        assert sum(s.succeeded) == sum(1 for st, _ in rows if st == "succeeded")
        assert sum(s.failed) == sum(1 for st, _ in rows if st == "failed")
        latencies = sorted(max(0, lat) for _, lat in rows)
        assert s.latency.count == len(latencies)
        for q, got in ((0.5, s.latency.p50_ms), (0.99, s.latency.p99_ms)):
            exact = latencies[max(0, -(-int(q * len(latencies) * 100) // 100) - 1)]
            assert got is not None and abs(got - exact) <= max(1, exact // 10) + 1, (q, got, exact)
    assert m.completions_read == 12
    [mail] = [s for s in m.by_queue() if s.queue == "mail"]
    assert mail.name == "*" and sum(mail.succeeded) + sum(mail.failed) == 6
    wide = await shared.inspector.metrics(window_ms=3 * HOUR)
    assert wide.completions_read == 13
    capped = await shared.inspector.metrics(window_ms=3 * HOUR, cap=5)
    assert capped.completions_read == 5 and capped.capped
    assert capped.note == "the newest 5 completions" and not capped.estimated
    with pytest.raises(ValueError, match="window_ms"):
        await shared.inspector.metrics(window_ms=1_000)


async def test_metrics_above_the_sample_size_are_estimated_from_time_slices(
    shared: Shared,
) -> None:
    """A window holding more completions than ``sample`` is read in slices: only
    the rows inside them are counted, each (status, bucket) is scaled to its exact
    total, and the result says it is estimated and from how many rows."""
    ids = [await shared.succeed(f"n{i % 2}", queue="q") for i in range(24)]
    ids += [await shared.fail("n0", "E", f"boom {i}", queue="q") for i in range(6)]
    now = max(int(r[0]) for r in shared.sql("select completed_at_ms from cairnq_tasks"))
    for k, task_id in enumerate(ids):  # one completion every 7.9 s, due 1 s before
        at = now - k * 7_919
        shared.sql(
            "update cairnq_tasks set completed_at_ms = ?, run_at_ms = ? where id = ?",
            (at, at - 1_000 - k, task_id),
        )
    inspector = Inspector(shared.store, clock=lambda: now)
    m = await inspector.metrics(window_ms=HOUR, sample=10)
    # The slices as documented: ten per one-minute bucket, 2,000 ms of each 6 s
    # stride (sample / completions of it), at a pseudo-random offset.
    stride, slice_ms = 6_000, 2_000
    start = (now - HOUR) // 60_000 * 60_000
    bounds = [
        (start + i * stride + (i * 2654435761) % (stride - slice_ms + 1),)
        for i in range((now - start) // stride + 1)
    ]
    times = {now - k * 7_919: ("succeeded" if k < 24 else "failed") for k in range(30)}
    inside = {t: st for t, st in times.items() if any(lo <= t < lo + slice_ms for (lo,) in bounds)}
    assert 0 < len(inside) < 30  # a real sample
    assert m.estimated and not m.capped
    assert m.completions == 30 and m.completions_read == len(inside)
    assert m.note == f"estimated from a sample of {len(inside)} of 30 completions"
    [q] = m.by_queue()
    assert q.latency.count == len(inside)
    # Each bucket the sample reached holds its exact total, per status.
    for status in ("succeeded", "failed"):
        got = getattr(q, status)
        for index, n in enumerate(got):
            lo = m.bucket_start_ms + index * m.bucket_ms
            exact = sum(1 for t, st in times.items() if st == status and lo <= t < lo + m.bucket_ms)
            reached = any(st == status and lo <= t < lo + m.bucket_ms for t, st in inside.items())
            assert n == (exact if reached else 0), (status, index)
    with pytest.raises(ValueError, match="sample"):
        await inspector.metrics(window_ms=HOUR, sample=0)


# -- workers ----------------------------------------------------------------------------


async def test_workers_holding_leases_and_the_ones_that_stopped(shared: Shared) -> None:
    for name in ("a", "b", "a"):
        await shared.submit(name, queue="live")
    for name in ("c", "d"):
        await shared.submit(name, queue="dead")
    await shared.submit("idle", queue="live")  # queued, held by nobody
    live = await shared.peer.store.claim(
        queues=["live"], worker_id="worker_live", lease_ms=60_000, limit=3
    )
    dead = await shared.peer.store.claim(
        queues=["dead"], worker_id="worker_dead", lease_ms=1, limit=2
    )
    await asyncio.sleep(0.05)  # the 1 ms leases run out, unrenewed (no claim since)

    workers = await shared.inspector.workers()
    assert [w.worker_id for w in workers] == ["worker_dead", "worker_live"]
    stopped, alive = workers
    assert stopped.stopped_heartbeating and stopped.tasks == 2
    assert set(stopped.expired_task_ids) == {t.id for t in dead}
    assert stopped.names == ("c", "d") and stopped.shortest_lease_left_ms < 0
    assert not alive.stopped_heartbeating and alive.tasks == 3 and alive.expired_task_ids == ()
    assert alive.names == ("a", "b") and alive.queues == ("live",)
    assert 0 < alive.shortest_lease_left_ms <= 60_000
    assert {t.id for t in live} <= {
        r[0] for r in shared.sql("select id from cairnq_tasks where worker_id = 'worker_live'")
    }
    # Once recovered (a claim of any SDK recovers expired leases first), the
    # stopped worker holds nothing any more.
    await shared.peer.store.claim(queues=["none"], worker_id="w9", lease_ms=1_000)
    assert [w.worker_id for w in await shared.inspector.workers()] == ["worker_live"]


async def test_a_lease_is_expired_at_its_very_millisecond(shared: Shared) -> None:
    """PROTOCOL.md: recovery takes ``lease_until_ms <= now`` and ownership needs
    ``lease_until_ms > now``, so a lease ending this millisecond is already dead."""
    for name in ("edge", "after", "before"):
        await shared.submit(name, queue="edge")
    claimed = await shared.peer.store.claim(
        queues=["edge"], worker_id="w_edge", lease_ms=60_000, limit=3
    )
    by_name = {t.name: t.id for t in claimed}
    at = 4_102_444_800_000  # far ahead: no real clock reaches it while the test runs
    for name, until in (("edge", at), ("after", at + 1), ("before", at - 1)):
        shared.sql(
            "update cairnq_tasks set lease_until_ms = ? where id = ?", (until, by_name[name])
        )
    await shared.submit("other", queue="elsewhere")  # good traffic, not running

    def frozen(ms: int) -> Inspector:
        return Inspector(shared.store, clock=lambda: ms)

    [worker] = await frozen(at).workers()
    assert set(worker.expired_task_ids) == {by_name["edge"], by_name["before"]}
    assert not worker.stopped_heartbeating and worker.shortest_lease_left_ms == -1
    [earlier] = await frozen(at - 1).workers()
    assert earlier.expired_task_ids == (by_name["before"],)
    [later] = await frozen(at + 1).workers()
    assert later.stopped_heartbeating and len(later.expired_task_ids) == 3
    assert later.shortest_lease_left_ms == -2


def test_latency_percentiles_from_the_histogram() -> None:
    from engine.inspection import Latency

    # Exact under 100 ms; above, the middle of a two-significant-digit bucket.
    lat = Latency.of([(7, 50), (1200, 45), (15000, 4), (990_000, 1)])
    assert (lat.count, lat.p50_ms, lat.p95_ms, lat.p99_ms) == (100, 7, 1250, 15500)
    assert Latency.of([]).p50_ms is None and Latency.of([]).count == 0
    merged = Latency.of([(40, 1), (40, 1), (50, 2)])
    assert merged.histogram == ((40, 2), (50, 2)) and merged.p50_ms == 40
