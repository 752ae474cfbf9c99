"""Failure triage: error search, failure groups and the selection a group action uses.

Every read goes through the (status, completed_at_ms) index of the protocol's
schema: failed tasks are walked newest completion first, and never more than a
window of the newest N failures is read (``DEFAULT_SEARCH_WINDOW``, 10,000, for
an error search; ``DEFAULT_ERROR_WINDOW``, 100,000, for the groups), so the cost
follows N, not the table. Queued tasks retrying after an error are read
from the same index (status ``queued``), at most ``payload_scan`` of them.

The engine adds no index of its own for this (docs/engine.md, "Failure triage"):
the schema is shared with the cairnq SDKs, whose writes would pay for it.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from engine._inspect_reads import InspectorReads
from engine._inspect_types import (
    TaskFilter,
    TaskPage,
    TaskSummary,
    order_time,
    parse_time_cursor,
    summary_from_row,
)
from engine._triage_types import FailureGroup, FailureGroups, FailureSelection

#: Past every time a row can hold / before every one (cursor sentinels).
_MAX_MS = 1 << 62
_MIN_MS = -(1 << 62)
#: How many matches of queued retrying tasks one page merges in at most.
_RETRYING_MATCHES = 1_000

# Masking works on text whose digits are folded to "#" first: the statements fold
# them already (so messages differing only in numbers are counted as one row by
# the database), and folding again here is a no-op. A literal "#" is read as a digit.
_FOLD = str.maketrans("0123456789", "##########")
_W = r"[A-Za-z0-9_#]"
_START, _END = rf"(?<!{_W})", rf"(?!{_W})"
_MASKS: tuple[tuple[re.Pattern[str], str, str], ...] = (
    # (pattern, mask, a character the text must hold for the pattern to apply)
    (
        re.compile(r"[#a-fA-F]{8}-[#a-fA-F]{4}-[#a-fA-F]{4}-[#a-fA-F]{4}-[#a-fA-F]{12}"),
        "<uuid>",
        "-",
    ),
    # prefixed ULIDs (task_…, worker_…) and bare ones
    (re.compile(rf"{_START}(?:[A-Za-z]+_)?[#A-HJKMNP-TV-Z]{{26}}{_END}"), "<id>", "#"),
    (re.compile(rf"{_START}#[xX][#a-fA-F]+{_END}"), "<hex>", "#"),
    # words of hex digits holding a letter, when they also hold a digit ("beef42",
    # hashes, object addresses) or are 8 long or more ("deadbeef", "FACEFEED":
    # English words of the letters a-f stop at 7, so "decade", "facade" and
    # "defaced" stay words); words of digits alone are numbers, below
    (
        re.compile(
            rf"{_START}(?=[#a-fA-F]*[a-fA-F])(?:(?=[#a-fA-F]*#)[#a-fA-F]+|[a-fA-F]{{8,}}){_END}"
        ),
        "<hex>",
        "",
    ),
    (re.compile(r"#+(?:\.#+)?"), "<n>", "#"),
)


def mask_message(text: str) -> str:
    """``text`` with its volatile parts masked: uuids, ids, hex, then numbers.

    ``"task_01J9… timed out after 30.5 s (attempt 3)"`` and the same error of
    another task become one ``"<id> timed out after <n> s (attempt <n>)"``.
    """
    return _mask_folded(text.translate(_FOLD))


@lru_cache(maxsize=65_536)
def _mask_folded(text: str) -> str:
    for pattern, mask, needs in _MASKS:
        if needs in text:
            text = pattern.sub(mask, text)
    return text


# -- error search --------------------------------------------------------------------


#: How long the window's edge is reused: typing a search re-reads pages, and
#: finding the edge reads up to ``error_window`` index entries. Failures newer than
#: a reused edge are still searched (the edge is a lower bound of time).
WINDOW_EDGE_TTL_S = 10.0


async def error_window(inspector: InspectorReads) -> tuple[int, int]:
    """``(floor_ms, failures)``: where the window of the newest failures starts and
    how many it holds (at most ``inspector.search_window``). One index read when the
    window is full (the floor), a capped count when it is not; reused for
    ``WINDOW_EDGE_TTL_S`` seconds."""
    cached = inspector.window_edge
    if cached is not None and cached[0] > time.monotonic():
        return cached[1], cached[2]
    window = inspector.search_window
    rows = await inspector._read("inspect_failures_floor", {"skip": window - 1})
    if rows and rows[0]["completed_at_ms"] is not None:
        edge = int(rows[0]["completed_at_ms"]), window
    else:
        span = await inspector._read("inspect_failures_span", {"cap": window})
        edge = _MIN_MS, int(span[0]["n"]) if span else 0
    inspector.window_edge = (time.monotonic() + WINDOW_EDGE_TTL_S, *edge)
    return edge


def _raw_text(text: str) -> str | None:
    """``text`` when the envelope's JSON text must hold it as is (printable ASCII
    with nothing JSON escapes), so the statement may look in the raw column first;
    None otherwise (the statement then only matches the decoded fields)."""
    plain = text.isascii() and text.isprintable() and not set(text) & {'"', "\\", "/"}
    return text if plain else None


def _window_note(inspector: InspectorReads, held: int) -> str:
    if held >= inspector.search_window:
        return f"searched the newest {inspector.search_window:,} failures"
    if held == 1:
        return "searched the 1 failure"
    return f"searched all {held:,} failures" if held else "searched 0 failures"


async def error_page(
    inspector: InspectorReads,
    flt: TaskFilter,
    *,
    before: str | None,
    after: str | None,
    limit: int,
) -> TaskPage:
    """A page of failed (and retrying) tasks whose error type or message contains
    the search text, newest failure first; see ``Inspector.tasks_page``."""
    text = (flt.active_search or "").strip().lower()
    floor_ms, held = await error_window(inspector)
    note = _window_note(inspector, held)
    forward = after is None
    cursor = before if forward else after
    cursor_ms, cursor_id = parse_time_cursor(cursor) if cursor else (None, None)
    base: dict[str, Any] = {
        "text": text,
        "raw_text": _raw_text(text),
        "queue": flt.queue,
        "name": flt.name,
    }
    failed: list[dict[str, Any]] = []
    if flt.status in (None, "failed"):
        params = {
            **base,
            "floor_ms": floor_ms,
            "cursor_ms": cursor_ms if cursor_ms is not None else (_MAX_MS if forward else _MIN_MS),
            "cursor_id": cursor_id if cursor_id is not None else ("" if not forward else "~"),
            "limit": limit + 1,
        }
        name = "inspect_errors_failed_older" if forward else "inspect_errors_failed_newer"
        failed = await inspector._read(name, params)
    retrying: list[dict[str, Any]] = []
    if flt.status in (None, "queued"):
        params = {**base, "scan_limit": inspector.payload_scan, "limit": _RETRYING_MATCHES}
        retrying = await inspector._read("inspect_errors_retrying", params)
    rows = [summary_from_row(r) for r in [*failed, *retrying]]
    if cursor_ms is not None and cursor_id is not None:
        mark = (cursor_ms, cursor_id)
        rows = [r for r in rows if ((_key(r) < mark) if forward else (_key(r) > mark))]
    rows.sort(key=_key, reverse=forward)
    more = len(rows) > limit
    rows = rows[:limit]
    if not forward:
        if not more:
            return await error_page(inspector, flt, before=None, after=None, limit=limit)
        rows.reverse()
    return TaskPage(
        rows=tuple(rows),
        order="failure",
        has_previous=(before is not None) if forward else True,
        has_next=more if forward else True,
        total=None,
        scan_limit=inspector.search_window,
        window_note=note,
    )


def _key(row: TaskSummary) -> tuple[int, str]:
    return (order_time(row, "failure"), row.id)


# -- failure groups ------------------------------------------------------------------


@dataclass
class _Group:
    count: int = 0
    first_ms: int = _MAX_MS
    last_ms: int = _MIN_MS
    example_id: str = ""
    buckets: dict[int, int] = field(default_factory=dict)


async def _since(
    inspector: InspectorReads, window_ms: int | None, now: int
) -> tuple[int, int | None]:
    """``(start of the read, since_ms as asked)``; "everything" starts at the oldest failure."""
    if window_ms is not None:
        if isinstance(window_ms, bool) or not isinstance(window_ms, int) or window_ms < 1:
            raise ValueError(f"window_ms must be a positive integer or None, got {window_ms!r}")
        return now - window_ms, now - window_ms
    span = await inspector._read("inspect_failures_span", {"cap": 1})
    oldest = span[0]["oldest_ms"] if span else None
    return (int(oldest) if oldest is not None else now), None


async def _newest(inspector: InspectorReads, start: int, cap: int) -> tuple[int, bool]:
    """``(where to start reading, capped)``: ``start``, raised to the completion time
    of the ``cap``-th newest failure when the window holds more than ``cap``.

    A range of the index from that edge reads the newest ``cap`` failures (a few
    more when several completed in the edge's millisecond) with no sort.
    """
    rows = await inspector._read("inspect_failures_floor", {"skip": cap - 1})
    if len(rows) < 2 or rows[1]["completed_at_ms"] is None:
        return start, False  # at most ``cap`` failures in all
    edge, beyond = int(rows[0]["completed_at_ms"]), int(rows[1]["completed_at_ms"])
    if beyond < start:
        return start, False  # the window holds at most ``cap``
    return max(start, edge), True


async def failure_groups(
    inspector: InspectorReads,
    *,
    window_ms: int | None,
    buckets: int = 30,
    cap: int | None = None,
) -> FailureGroups:
    """See ``Inspector.failure_groups``."""
    if isinstance(buckets, bool) or not isinstance(buckets, int) or not 1 <= buckets <= 1000:
        raise ValueError(f"buckets must be within 1..1000, got {buckets!r}")
    cap = inspector.error_window if cap is None else inspector._cap(cap)
    now = inspector.clock()
    start, since_ms = await _since(inspector, window_ms, now)
    bucket_ms = max(1_000, math.ceil(max(now - start, 1) / buckets))
    read_from, capped = await _newest(inspector, start, cap)
    rows = await inspector._read(
        "inspect_failure_groups", {"since_ms": read_from, "bucket_ms": bucket_ms}
    )
    groups: dict[tuple[str, str, str], _Group] = {}
    read = 0
    for r in rows:
        key = (str(r["name"]), str(r["error_type"]), mask_message(str(r["first_line"])))
        group = groups.get(key)
        if group is None:
            group = groups[key] = _Group()
        n, last = int(r["n"]), int(r["last_ms"])
        read += n
        group.count += n
        group.first_ms = min(group.first_ms, int(r["first_ms"]))
        if last > group.last_ms or (last == group.last_ms and r["example_id"] > group.example_id):
            group.example_id = str(r["example_id"])
        group.last_ms = max(group.last_ms, last)
        bucket = int(r["bucket"])
        group.buckets[bucket] = group.buckets.get(bucket, 0) + n
    first_bucket = start // bucket_ms
    width = now // bucket_ms - first_bucket + 1
    out = [
        FailureGroup(
            name=key[0],
            error_type=key[1],
            message=key[2],
            count=g.count,
            first_seen_ms=g.first_ms,
            last_seen_ms=g.last_ms,
            example_id=g.example_id,
            buckets=tuple(g.buckets.get(first_bucket + i, 0) for i in range(width)),
        )
        for key, g in groups.items()
    ]
    out.sort(key=lambda g: (-g.count, -g.last_seen_ms, g.key))
    return FailureGroups(
        groups=tuple(out),
        since_ms=since_ms,
        until_ms=now,
        bucket_ms=bucket_ms,
        bucket_start_ms=first_bucket * bucket_ms,
        failures_read=read,
        cap=cap,
        capped=capped,
    )


async def failure_selection(
    inspector: InspectorReads,
    group: FailureGroup | tuple[str, str, str],
    *,
    window_ms: int | None,
    limit: int = 1_000,
    cap: int | None = None,
) -> FailureSelection:
    """See ``Inspector.failure_selection``."""
    name, error_type, message = group.key if isinstance(group, FailureGroup) else group
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"limit must be a positive integer, got {limit!r}")
    cap = inspector.error_window if cap is None else inspector._cap(cap)
    start, since_ms = await _since(inspector, window_ms, inspector.clock())
    start, capped = await _newest(inspector, start, cap)
    rows = await inspector._read(
        "inspect_failure_group_members",
        {"name": name, "error_type": error_type, "since_ms": start},
    )
    ids: list[str] = []
    queues: set[str] = set()
    count = 0
    for r in rows:
        if mask_message(str(r["first_line"])) != message:
            continue
        count += 1
        queues.add(str(r["queue"]))
        if len(ids) < limit:
            ids.append(str(r["id"]))
    return FailureSelection(
        name=name,
        error_type=error_type,
        message=message,
        since_ms=since_ms,
        count=count,
        task_ids=tuple(ids),
        queues=tuple(sorted(queues)),
        capped=capped,
    )
