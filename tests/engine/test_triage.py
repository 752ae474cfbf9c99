"""Failure triage on databases cairnq 0.15.1 wrote: error columns, error search,
failure groups and the selection of a group action, on SQLite and Postgres.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from triage_support import DIALECTS, Shared, open_shared

from engine.inspection import (
    FailureGroups,
    Inspector,
    TaskFilter,
    mask_message,
    parse_duration,
)

pytestmark = pytest.mark.peer

DAY = 86_400_000


@pytest.fixture(params=DIALECTS)
async def shared(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Shared]:
    async for s in open_shared(request, tmp_path):
        yield s


# -- pure helpers -----------------------------------------------------------------------


def test_masking_folds_volatile_parts() -> None:
    assert mask_message("order 4242 not found") == "order <n> not found"
    assert (
        mask_message("request 3f2a9c1e-0b7d-4e5f-9a1b-2c3d4e5f6a7b failed")
        == "request <uuid> failed"
    )
    assert mask_message("lost task_01J9ZQ3X5V8KD2N4M6P7R8S9TA") == "lost <id>"
    assert mask_message("bad object at 0x7f3a2b10") == "bad object at <hex>"
    assert mask_message("digest 9f86d081884c7d65 mismatch") == "digest <hex> mismatch"
    assert mask_message("took 30.5 s (attempt 3)") == "took <n> s (attempt <n>)"
    # Short words are kept, even hex-looking ones without a digit.
    assert mask_message("bad cafe failed") == "bad cafe failed"
    # The statements fold digits to "#" before grouping; masking the folded text
    # gives what masking the original gives.
    raw = "lost task_01J9ZQ3X5V8KD2N4M6P7R8S9TA at 0x7f3a2b10 after 30.5 s, digest 9f86d081884c"
    folded = raw.translate(str.maketrans("0123456789", "#" * 10))
    assert (
        mask_message(folded)
        == mask_message(raw)
        == ("lost <id> at <hex> after <n> s, digest <hex>")
    )


def test_masking_takes_whole_hex_words() -> None:
    # A hex word holding a digit is one volatile part, never "beef<n>".
    assert mask_message("cache key beef42 stale") == "cache key <hex> stale"
    assert mask_message("row 7fa3 and ab1") == "row <hex> and <hex>"
    # Eight hex letters or more without a digit are a value too; fewer are words
    # (English has words of a-f up to seven letters: they must not merge groups).
    assert mask_message("deadbeef cafe failed") == "<hex> cafe failed"
    assert mask_message("DEADBEEF and c0ffee") == "<hex> and <hex>"
    assert mask_message("bad face") == "bad face"
    assert mask_message("a decade of facade, defaced") == "a decade of facade, defaced"
    assert mask_message("Accede to EFFACED") == "Accede to EFFACED"
    # Digits alone stay numbers; 0x-prefixed runs and uuids keep their masks.
    assert mask_message("order 4242 and 0xBEEF") == "order <n> and <hex>"
    assert (
        mask_message("uuid 3F2A9C1E-0B7D-4E5F-9A1B-2C3D4E5F6A7B, sha 9f86d0")
        == "uuid <uuid>, sha <hex>"
    )
    # Folded text masks the same way.
    raw = "cache key beef42 at 0x7f and deadbeef"
    assert mask_message(raw.translate(str.maketrans("0123456789", "#" * 10))) == mask_message(raw)


def test_durations() -> None:
    assert parse_duration("15m") == 900_000
    assert parse_duration("24h") == DAY
    assert parse_duration(" 7d ") == 7 * DAY
    assert parse_duration("500ms") == 500
    assert parse_duration("1.5h") == 5_400_000
    assert parse_duration("2w") == 14 * DAY
    for bad in ("", "15", "m", "-5m", "0s", "0", "1y", "1e3s", "nan s", "99999999999999w"):
        with pytest.raises(ValueError, match="duration"):
            parse_duration(bad)
    # Where zero means something (a purge of any age, a delay of none).
    assert parse_duration("0", zero=True) == parse_duration(" 0s ", zero=True) == 0
    for bad in ("7", "-1d", "00x"):
        with pytest.raises(ValueError, match="duration"):
            parse_duration(bad, zero=True)


def test_bad_filters_and_windows_are_refused() -> None:
    with pytest.raises(ValueError, match="sort"):
        TaskFilter(sort="name")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="since_ms"):
        TaskFilter(since_ms=10, until_ms=10)
    with pytest.raises(ValueError, match="since_ms"):
        TaskFilter(since_ms="1h")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="descending"):
        TaskFilter(descending=None)  # type: ignore[arg-type]


# -- error columns ----------------------------------------------------------------------


async def test_failed_and_retrying_tasks_list_their_error(shared: Shared) -> None:
    failed = await shared.fail("charge", "KeyError", "order 42 not found\n  at line 3")
    retrying = await shared.fail(
        "charge", "TimeoutError", "gave up after 30 s", retryable=True, max_attempts=3
    )
    done = await shared.succeed("charge")
    fresh = await shared.submit("charge")
    # Running again after an error: the error is an earlier attempt's, not shown.
    rerun = await shared.fail(
        "ship", "OSError", "disk full", retryable=True, max_attempts=3, queue="rerun"
    )
    assert (await shared.claim("w2", queue="rerun")).id == rerun
    expected = {
        failed: ("KeyError", "order 42 not found"),
        retrying: ("TimeoutError", "gave up after 30 s"),
        done: (None, None),
        fresh: (None, None),
        rerun: (None, None),
    }
    for flt in (
        TaskFilter(),
        TaskFilter(sort="updated"),
        TaskFilter(sort="due", descending=False),
    ):
        page = await shared.inspector.tasks_page(flt, limit=50)
        seen = {r.id: (r.error_type, r.error_message) for r in page.rows}
        assert {k: seen[k] for k in expected} == expected, flt
    # The dense and sparse paths of a status filter, and the completion sort.
    for flt in (TaskFilter(status="failed"), TaskFilter(sort="completed")):
        page = await shared.inspector.tasks_page(flt, limit=50)
        row = next(r for r in page.rows if r.id == failed)
        assert (row.error_type, row.error_message) == ("KeyError", "order 42 not found")


# -- error search -----------------------------------------------------------------------


async def test_error_search_matches_type_and_message_of_failures(shared: Shared) -> None:
    a = await shared.fail("charge", "KeyError", "order 1 NOT found")
    b = await shared.fail("ship", "LookupError", "parcel 7 not found")
    c = await shared.fail("charge", "ValueError", "bad amount")
    retrying = await shared.fail(
        "charge", "KeyError", "order 9 not found", retryable=True, max_attempts=3
    )
    # Good traffic with the text elsewhere: in a payload, in a progress message.
    await shared.submit("charge", payload={"note": "not found"})
    await shared.succeed("charge")

    async def search(text: str, **kw: object) -> list[str]:
        flt = TaskFilter(search=text, search_kind="error", **kw)  # type: ignore[arg-type]
        page = await shared.inspector.tasks_page(flt, limit=50)
        assert page.window_note == "searched all 3 failures"
        assert page.order == "failure"
        return [r.id for r in page.rows]

    found = await search("not FOUND")
    assert set(found) == {a, b, retrying}
    # Newest failure first: a, b by completion, the retrying one by its failure.
    times = {
        r[0]: r[1]
        for r in shared.sql("select id, coalesce(completed_at_ms, updated_at_ms) from cairnq_tasks")
    }
    assert found == sorted(found, key=lambda i: (times[i], i), reverse=True)
    assert await search("keyerror") == sorted(
        [a, retrying], key=lambda i: (times[i], i), reverse=True
    )
    assert await search("bad amount") == [c]
    assert await search("not found", status="failed") == sorted(
        [a, b], key=lambda i: (times[i], i), reverse=True
    )
    assert await search("not found", status="queued") == [retrying]
    assert await search("not found", name="ship") == [b]
    assert await search("not found", status="succeeded") == []
    assert await search("nowhere") == []


async def test_error_search_finds_text_json_escapes(shared: Shared) -> None:
    """Text the envelope's JSON escapes (quotes, backslashes, "/", non-ASCII the
    writer may spell \\uXXXX) is matched on the decoded fields, never missed."""
    odd = await shared.fail("job", "EncodeError", 'café "quoted" at path/to\\file: tab\there')
    plain = await shared.fail("job", "E", "plain text")

    async def search(text: str) -> set[str]:
        flt = TaskFilter(search=text, search_kind="error")
        return {r.id for r in (await shared.inspector.tasks_page(flt, limit=50)).rows}

    for text in ("CAFÉ", '"quoted"', "path/to", "to\\file", "caf", "tab\there", "encodeerror"):
        assert await search(text) == {odd}, text
    assert await search("plain") == {plain}
    # A failure newer than the window's edge the inspector reuses is still found.
    later = await shared.fail("job", "E", "plain again")
    assert await search("plain") == {plain, later}


async def test_error_search_pages_both_ways(shared: Shared) -> None:
    ids = [await shared.fail("job", "E", f"boom {i}") for i in range(7)]
    flt = TaskFilter(search="boom", search_kind="error")
    pages, cursor = [], None
    while True:
        page = await shared.inspector.tasks_page(flt, before=cursor, limit=3)
        pages.append([r.id for r in page.rows])
        if not page.has_next:
            break
        cursor = page.last_cursor
    walked = [i for p in pages for i in p]
    assert sorted(walked) == sorted(ids) and len(walked) == 7
    assert [len(p) for p in pages] == [3, 3, 1]
    # Back from the last page to the first, through the cursors.
    page = await shared.inspector.tasks_page(flt, before=cursor, limit=3)
    back = await shared.inspector.tasks_page(flt, after=page.first_cursor, limit=3)
    assert [r.id for r in back.rows] == pages[1]
    first = await shared.inspector.tasks_page(flt, after=back.first_cursor, limit=3)
    assert [r.id for r in first.rows] == pages[0] and not first.has_previous


async def test_error_search_reads_only_the_newest_failures_and_says_so(shared: Shared) -> None:
    old = await shared.fail("job", "E", "needle in an old failure")
    shared.age(old, DAY)
    newer = [await shared.fail("job", "E", f"needle {i}") for i in range(3)]
    narrow = Inspector(shared.store, search_window=3)
    flt = TaskFilter(search="needle", search_kind="error")
    page = await narrow.tasks_page(flt, limit=50)
    assert page.window_note == "searched the newest 3 failures"
    assert {r.id for r in page.rows} == set(newer)
    wide = await shared.inspector.tasks_page(flt, limit=50)
    assert {r.id for r in wide.rows} == {*newer, old}
    assert wide.window_note == "searched all 4 failures"
    # The failure groups' window does not narrow a search (its own is search_window).
    groups_only = Inspector(shared.store, error_window=3)
    assert (await groups_only.tasks_page(flt, limit=50)).window_note == "searched all 4 failures"


# -- failure groups ---------------------------------------------------------------------


async def test_failure_groups_fold_volatile_parts(shared: Shared) -> None:
    declined = [
        await shared.fail("charge", "CardError", f"card {n} declined (request {u})")
        for n, u in (
            (4242, "3f2a9c1e-0b7d-4e5f-9a1b-2c3d4e5f6a7b"),
            (1, "00000000-0000-4000-8000-000000000001"),
            (77, "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee"),
        )
    ]
    timeouts = [
        await shared.fail("charge", "TimeoutError", f"gave up after {s} s\ntraceback {s}")
        for s in (30, 31)
    ]
    other_name = await shared.fail("ship", "CardError", "card 5 declined (request x)")
    await shared.succeed("charge")  # good traffic is not counted
    await shared.fail("charge", "CardError", "card 9 declined", retryable=True, max_attempts=3)

    result = await shared.inspector.failure_groups(window_ms=DAY, buckets=12)
    groups = {g.key: g for g in result.groups}
    assert set(groups) == {
        ("charge", "CardError", "card <n> declined (request <uuid>)"),
        ("charge", "TimeoutError", "gave up after <n> s"),
        ("ship", "CardError", "card <n> declined (request x)"),
    }
    assert [g.count for g in result.groups] == [3, 2, 1]  # most failures first
    assert result.failures_read == 6 and not result.capped
    assert result.window_note == "grouped 6 failures"
    times = dict(shared.sql("select id, completed_at_ms from cairnq_tasks where status = 'failed'"))
    card = groups[("charge", "CardError", "card <n> declined (request <uuid>)")]
    assert card.first_seen_ms == min(times[i] for i in declined)
    assert card.last_seen_ms == max(times[i] for i in declined)
    assert card.example_id == max(declined, key=lambda i: (times[i], i))
    assert sum(card.buckets) == 3 and len(card.buckets) >= 12
    assert groups[("charge", "TimeoutError", "gave up after <n> s")].example_id in timeouts
    assert groups[("ship", "CardError", "card <n> declined (request x)")].example_id == other_name

    selection = await shared.inspector.failure_selection(card, window_ms=DAY)
    assert selection.count == 3 and set(selection.task_ids) == set(declined)
    assert selection.queues == ("default",) and not selection.truncated
    one = await shared.inspector.failure_selection(card.key, window_ms=DAY, limit=1)
    assert one.count == 3 and one.task_ids == (card.example_id,) and one.truncated


async def test_failure_groups_follow_the_window(shared: Shared) -> None:
    recent = await shared.fail("job", "E", "boom 1")
    yesterday = await shared.fail("job", "E", "boom 2")
    last_week = await shared.fail("job", "E", "boom 3")
    shared.age(yesterday, DAY + 3_600_000)
    shared.age(last_week, 6 * DAY)

    async def count(window_ms: int | None) -> int:
        result = await shared.inspector.failure_groups(window_ms=window_ms)
        return sum(g.count for g in result.groups)

    assert await count(3_600_000) == 1
    assert await count(2 * DAY) == 2
    assert await count(7 * DAY) == 3
    everything = await shared.inspector.failure_groups(window_ms=None, buckets=7)
    assert everything.since_ms is None
    [group] = everything.groups
    assert group.count == 3 and sum(group.buckets) == 3
    # The oldest failure lands in the first bucket, the newest in the last.
    assert group.buckets[0] == 1 and group.buckets[-1] == 1
    sel = await shared.inspector.failure_selection(group, window_ms=2 * DAY)
    assert set(sel.task_ids) == {recent, yesterday} and sel.count == 2 and not sel.capped
    # A cap of 2 holds that window whole, but not everything retained.
    assert not (await shared.inspector.failure_selection(group, window_ms=2 * DAY, cap=2)).capped
    cut = await shared.inspector.failure_selection(group, window_ms=None, cap=2)
    assert cut.capped and cut.count == 2 and set(cut.task_ids) == {recent, yesterday}
    capped = await shared.inspector.failure_groups(window_ms=None, cap=2)
    assert capped.failures_read == 2 and capped.capped
    assert capped.window_note == "grouped the newest 2 failures"
    with pytest.raises(ValueError, match="window_ms"):
        await shared.inspector.failure_groups(window_ms=0)
    with pytest.raises(ValueError, match="buckets"):
        await shared.inspector.failure_groups(buckets=0)


async def test_failures_a_cairnq_worker_records_group_by_their_real_envelopes(
    shared: Shared,
) -> None:
    """Errors raised in a cairnq 0.15.1 handler, as its worker writes them."""
    from triage_support import cairnq

    w = cairnq.Worker(shared.peer.store, ["default"], concurrency=2, poll_interval_ms=20)

    @w.task
    async def lookup(ctx, payload):  # type: ignore[no-untyped-def]
        raise KeyError(f"order {payload['n']} missing")

    ids = [await shared.submit("lookup", payload={"n": n}, max_attempts=1) for n in range(4)]
    async with w.background():
        for task_id in ids:
            done = await shared.peer.wait(task_id, timeout_ms=20_000)
            assert done.status == "failed"
    result = await shared.inspector.failure_groups(window_ms=DAY)
    [group] = result.groups
    assert group.name == "lookup" and group.count == 4
    task = await shared.store.get(ids[0])
    assert task is not None and isinstance(task.error, dict)
    envelope = task.error
    assert group.error_type == envelope["type"]
    assert group.message == mask_message(str(envelope["message"]).split("\n")[0])
    page = await shared.inspector.tasks_page(
        TaskFilter(search=str(envelope["type"]).lower(), search_kind="error"), limit=10
    )
    assert {r.id for r in page.rows} == set(ids)


def test_window_notes_count_one_failure_in_the_singular() -> None:
    def groups(read: int, capped: bool = False) -> FailureGroups:
        return FailureGroups((), None, 0, 1_000, 0, read, 5, capped)

    assert groups(1).window_note == "grouped 1 failure"
    assert groups(3).window_note == "grouped 3 failures"
    assert groups(5, capped=True).window_note == "grouped the newest 5 failures"
