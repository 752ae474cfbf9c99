"""Inspector: bounded pages, counts and lookups, on SQLite and Postgres.

Each test fills a real database through the store's public operations and checks
the Inspector's answers against what those operations returned.
"""

from __future__ import annotations

import pytest
from schema_names import statement_names

from engine._inspect_search import normalise_id_prefix, prefix_range
from engine.inspection import CappedCount, Inspector, TaskFilter
from engine.store import TaskStore


async def fill(store: TaskStore) -> dict[str, list[str]]:
    """24 tasks over queues a/b and names x/y; some keyed, running, done, failed."""
    ids: dict[str, list[str]] = {"all": []}
    for i in range(24):
        task = await store.submit(
            name="x" if i % 3 else "y",
            queue="a" if i % 2 else "b",
            payload={"n": i, "tag": "needle" if i in (5, 17) else "hay"},
            key=f"order-{i:03d}" if i % 4 == 0 else None,
        )
        ids["all"].append(task.id)
    claimed = await store.claim(queues=["a"], worker_id="worker_1", limit=4)
    ids["running"] = [t.id for t in claimed]
    done = await store.claim(queues=["b"], worker_id="worker_2", limit=3)
    await store.complete(task_id=done[0].id, worker_id="worker_2", result={"ok": True})
    await store.fail(
        task_id=done[1].id,
        worker_id="worker_2",
        error={"type": "E", "message": "x"},
        retryable=False,
    )
    # Cancel wins over the completion that follows: canceled, not succeeded.
    await store.cancel(done[2].id)
    await store.complete(task_id=done[2].id, worker_id="worker_2")
    ids["succeeded"], ids["failed"], ids["canceled"] = [done[0].id], [done[1].id], [done[2].id]
    return ids


def test_both_dialects_ship_the_same_inspect_statements() -> None:
    sqlite = {n for n in statement_names("sqlite") if n.startswith("inspect_")}
    postgres = {n for n in statement_names("postgres") if n.startswith("inspect_")}
    # the health check's read of the server itself (clock, durability settings):
    # a SQLite file has no server
    assert sqlite == postgres - {"inspect_server"}
    assert "inspect_tasks_older" in sqlite


def test_prefix_helpers() -> None:
    assert prefix_range("ab") == ("ab", "ac")
    assert prefix_range("a\U0010ffff") == ("a\U0010ffff", "b")
    assert prefix_range("\U0010ffff") == ("\U0010ffff", None)
    assert normalise_id_prefix("01j9") == "task_01J9"
    assert normalise_id_prefix("TASK_01j") == "task_01J"
    assert normalise_id_prefix("hello world") == "hello world"
    assert str(CappedCount(10_000, 10_000)) == "10,000+"
    assert str(CappedCount(12, 10_000)) == "12"


async def test_pages_walk_every_task_both_ways(store: TaskStore) -> None:
    ids = await fill(store)
    inspector = Inspector(store)
    expected = sorted(ids["all"], reverse=True)
    seen: list[str] = []
    page = await inspector.tasks_page(TaskFilter(), limit=5)
    pages = [page]
    while True:
        seen.extend(r.id for r in page.rows)
        if not page.has_next:
            break
        page = await inspector.tasks_page(TaskFilter(), before=page.last_cursor, limit=5)
        pages.append(page)
    assert seen == expected
    assert pages[0].total == CappedCount(24, 10_000)
    assert not pages[0].has_previous and pages[1].has_previous
    # Backwards from the third page gives the second page again.
    back = await inspector.tasks_page(TaskFilter(), after=pages[2].first_cursor, limit=5)
    assert [r.id for r in back.rows] == [r.id for r in pages[1].rows]
    # A short backwards page falls back to the first page.
    first = await inspector.tasks_page(TaskFilter(), after=pages[0].rows[2].id, limit=5)
    assert [r.id for r in first.rows] == expected[:5]


@pytest.mark.parametrize("cap", [1, 10_000])
async def test_filters_agree_with_list_on_the_dense_and_sparse_paths(
    store: TaskStore, cap: int
) -> None:
    await fill(store)
    inspector = Inspector(store, count_cap=cap)
    for flt in [
        TaskFilter(status="queued"),
        TaskFilter(queue="a", status="running"),
        TaskFilter(name="y"),
        TaskFilter(queue="b", name="x", status="queued"),
    ]:
        page = await inspector.tasks_page(flt, limit=100)
        listed = await store.list(status=flt.status, queue=flt.queue, name=flt.name, limit=100)
        assert sorted(r.id for r in page.rows) == sorted(t.id for t in listed), flt
        assert [r.id for r in page.rows] == sorted((r.id for r in page.rows), reverse=True)
        assert page.total == CappedCount(min(len(listed), cap), cap)


async def test_searches_by_id_prefix_key_prefix_and_payload(store: TaskStore) -> None:
    ids = await fill(store)
    inspector = Inspector(store)
    target = ids["all"][7]
    by_id = await inspector.tasks_page(TaskFilter(search=target[5:].lower(), search_kind="id"))
    assert [r.id for r in by_id.rows] == [target]

    by_key = await inspector.tasks_page(TaskFilter(search="order-01", search_kind="key"))
    assert [r.key for r in by_key.rows] == ["order-012", "order-016"]
    assert by_key.order == "key" and by_key.total == CappedCount(2, 10_000)
    assert [r.id for r in by_key.rows] == [ids["all"][12], ids["all"][16]]
    paged = await inspector.tasks_page(
        TaskFilter(search="order-", search_kind="key"), before="order-004", limit=2
    )
    assert [r.key for r in paged.rows] == ["order-008", "order-012"]

    by_payload = await inspector.tasks_page(TaskFilter(search="needle", search_kind="payload"))
    assert sorted(r.id for r in by_payload.rows) == sorted([ids["all"][5], ids["all"][17]])
    assert by_payload.total is None and by_payload.scan_limit == inspector.payload_scan


async def test_queue_views(store: TaskStore) -> None:
    ids = await fill(store)
    await store.submit(name="later", queue="c", delay_ms=3_600_000)
    inspector = Inspector(store)
    assert await inspector.queues() == ["a", "b", "c"]
    assert await inspector.names() == ["later", "x", "y"]
    counts = await inspector.queue_counts()
    stats = await store.stats()
    assert {q: {s: c.value for s, c in per.items()} for q, per in counts.items()} == stats
    capped = await inspector.queue_counts(cap=2)
    assert capped["b"]["queued"] == CappedCount(2, 2) and capped["b"]["queued"].at_least

    # Per queue, name and status: zero counts left out; they add up to the above.
    by_name = await inspector.name_counts()
    listed = await store.list(limit=100)
    expected: dict[tuple[str, str | None, str], int] = {}
    for t in listed:
        expected[(t.queue, t.name, t.status)] = expected.get((t.queue, t.name, t.status), 0) + 1
    assert {k: c.value for k, c in by_name.items()} == expected
    # One name counted by name per queue and status: the next ones are "other" (None).
    first = await inspector.name_counts(names=1, cap=3)
    assert first[("b", "x", "queued")] == CappedCount(3, 3)  # x < y: x is first
    assert ("b", "y", "queued") not in first and first[("b", None, "queued")].value > 0
    live = await inspector.name_counts(live=True)
    assert live == {k: c for k, c in by_name.items() if k[2] in ("queued", "running")}
    # A background inspector reads the same (its own lane on SQLite).
    assert await Inspector(store, background=True).name_counts() == by_name
    with pytest.raises(ValueError):
        await inspector.name_counts(names=0)

    latency = await inspector.queue_latency()
    assert latency["c"].oldest_due_ms is None and latency["c"].next_delayed_ms is not None
    assert latency["b"].oldest_due_ms is not None and latency["b"].next_delayed_ms is None

    buckets = await inspector.throughput(minutes=5)
    totals = {(b.queue, b.status): b.count for b in buckets}
    assert totals == {("b", "succeeded"): 1, ("b", "failed"): 1, ("b", "canceled"): 1}

    running = await inspector.running()
    assert sorted(r.id for r in running) == sorted(ids["running"])
    assert {r.worker_id for r in running} == {"worker_1"}


async def test_keys_detail_and_purge_preview(store: TaskStore) -> None:
    ids = await fill(store)
    inspector = Inspector(store)
    page = await inspector.keys_page(limit=4)
    assert [k.key for k in page.rows] == ["order-000", "order-004", "order-008", "order-012"]
    assert page.has_next and not page.has_previous
    nxt = await inspector.keys_page(after=page.rows[-1].key, limit=4)
    assert [k.key for k in nxt.rows] == ["order-016", "order-020"] and not nxt.has_next
    back = await inspector.keys_page(before=nxt.rows[0].key, limit=2)
    assert [k.key for k in back.rows] == ["order-008", "order-012"]
    only = await inspector.keys_page("order-02")
    assert [(k.key, k.task_id, k.status) for k in only.rows] == [
        ("order-020", ids["all"][20], "queued")
    ]
    assert await inspector.keys_for_tasks([ids["all"][0], ids["all"][1]]) == {
        ids["all"][0]: ["order-000"]
    }

    parent = await store.get(ids["all"][0])
    assert parent is not None
    child = await store.submit(name="child", parent_id=parent.id, root_id=parent.root_id)
    detail = await inspector.task_detail(parent.id)
    assert detail is not None and detail.keys == ("order-000",)
    assert [c.id for c in detail.children] == [child.id]
    child_detail = await inspector.task_detail(child.id)
    assert child_detail is not None and child_detail.parent is not None
    assert child_detail.parent.id == parent.id and child_detail.root is not None
    assert await inspector.task_detail("task_00000000000000000000000000") is None

    preview = await inspector.count_purgeable(older_than_ms=0)
    assert preview == CappedCount(3, 10_000)
    assert await inspector.count_purgeable(status="failed") == CappedCount(1, 10_000)
    assert await inspector.count_purgeable(older_than_ms=3_600_000) == CappedCount(0, 10_000)
    with pytest.raises(ValueError):
        await inspector.count_purgeable(status="queued")
    assert (await inspector.meta())["protocol_version"] == "1"


async def test_matching_ids_for_bulk_actions(store: TaskStore) -> None:
    ids = await fill(store)
    inspector = Inspector(store)
    live = await inspector.matching_ids(TaskFilter(queue="a"), statuses=["queued", "running"])
    listed = await store.list(queue="a", limit=100)
    assert sorted(live) == sorted(t.id for t in listed if t.status in ("queued", "running"))
    assert len(await inspector.matching_ids(TaskFilter(), statuses=["queued"], cap=3)) == 3
    retryable = await inspector.matching_ids(TaskFilter(), statuses=["failed", "canceled"])
    assert sorted(retryable) == sorted(ids["failed"] + ids["canceled"])


def test_bad_filters_are_refused() -> None:
    with pytest.raises(ValueError):
        TaskFilter(status="done")
    with pytest.raises(ValueError):
        TaskFilter(search_kind="regex")  # type: ignore[arg-type]
