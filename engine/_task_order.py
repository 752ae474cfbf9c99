"""Task pages sorted by due, updated or completed time, either way, within a time range.

Creation order is the id order the inspector already walks (ids lead with their
creation millisecond). Completion order walks a completion index of the
protocol's schema (``inspect_sorted_completed_*``). No protocol index orders by
``run_at_ms`` alone or by ``updated_at_ms``, and the engine adds none (the
schema is shared with the cairnq SDKs; docs/engine.md, "Failure triage"), so
those two sorts order a window: every match when the filter is selective (read
through its index), else the newest ``payload_scan`` matching tasks (a walk of
the primary key). The page says which (``window_note``).
"""

from __future__ import annotations

from typing import Any

from engine._inspect_reads import InspectorReads
from engine._inspect_types import (
    CappedCount,
    PageOrder,
    TaskFilter,
    TaskPage,
    TaskSummary,
    order_time,
    parse_time_cursor,
    summary_from_row,
)
from engine._models import TERMINAL_STATUSES

_MAX_MS = 1 << 62
_MIN_MS = -(1 << 62)


async def sorted_page(
    inspector: InspectorReads,
    flt: TaskFilter,
    *,
    before: str | None,
    after: str | None,
    limit: int,
    total: CappedCount | None,
) -> TaskPage:
    """See ``Inspector.tasks_page`` (``flt.sort`` is due, updated or completed)."""
    order: PageOrder = flt.sort  # type: ignore[assignment]
    forward = after is None
    cursor = before if forward else after
    # Walk towards earlier times for a descending list, or back from an ascending one.
    older = forward == flt.descending
    if cursor:
        cursor_ms, cursor_id = parse_time_cursor(cursor)
    else:
        cursor_ms, cursor_id = (_MAX_MS, "") if older else (_MIN_MS, "")
    params: dict[str, Any] = {
        "status": flt.status,
        "queue": flt.queue,
        "name": flt.name,
        "from_ms": _MIN_MS if flt.since_ms is None else flt.since_ms,
        "to_ms": _MAX_MS if flt.until_ms is None else flt.until_ms,
        "cursor_ms": cursor_ms,
        "cursor_id": cursor_id,
        "limit": limit + 1,
    }
    note: str | None = None
    scan_limit: int | None = None
    if order == "completed":
        if total is None and not flt.has_time_range and flt.status in TERMINAL_STATUSES:
            total = await inspector.count_tasks(flt)
        elif flt.status not in TERMINAL_STATUSES:
            total = None
        name = "inspect_sorted_completed_" + ("older" if older else "newer")
        raw = await inspector._read(name, params)
        rows = [summary_from_row(r) for r in raw]
    else:
        if total is None:
            total = await inspector.count_tasks(flt.__class__(**_untimed(flt)))
        sparse = (
            total is not None
            and not total.at_least
            and any(v is not None for v in (flt.status, flt.queue, flt.name))
        )
        if sparse:
            assert total is not None
            rows = await _sparse_sorted(inspector, flt, order, total.value, params, older)
        else:
            scan_limit = inspector.payload_scan
            if total is None or total.at_least or total.value > scan_limit:
                note = f"sorted the newest {scan_limit:,} matching tasks"
            name = f"inspect_sorted_{order}_" + ("older" if older else "newer")
            raw = await inspector._read(name, {**params, "scan_limit": scan_limit})
            rows = [summary_from_row(r) for r in raw]
        if flt.has_time_range:
            total = None
    more = len(rows) > limit
    rows = rows[:limit]
    if not forward:
        if not more:
            return await sorted_page(
                inspector, flt, before=None, after=None, limit=limit, total=total
            )
        rows.reverse()
    return TaskPage(
        rows=tuple(await inspector.with_errors(rows)),
        order=order,
        has_previous=(before is not None) if forward else True,
        has_next=more if forward else True,
        total=total,
        scan_limit=scan_limit,
        window_note=note,
    )


def _untimed(flt: TaskFilter) -> dict[str, Any]:
    return {"status": flt.status, "queue": flt.queue, "name": flt.name}


async def _sparse_sorted(
    inspector: InspectorReads,
    flt: TaskFilter,
    order: PageOrder,
    matches: int,
    params: dict[str, Any],
    older: bool,
) -> list[TaskSummary]:
    """Every match of a selective filter (fewer than the count cap), through the
    filter's index, then ordered here: the same rows the window statement would
    order, without walking the primary key past the few that match."""
    read = {
        "status": flt.status,
        "queue": flt.queue,
        "name": flt.name,
        "id_from": None,
        "id_to": None,
        "before_id": None,
        "limit": matches + 1,
    }
    rows = [summary_from_row(r) for r in await inspector._read("inspect_tasks_sparse_older", read)]
    low, high = params["from_ms"], params["to_ms"]
    mark = (params["cursor_ms"], params["cursor_id"])
    kept = []
    for row in rows:
        key = (order_time(row, order), row.id)
        if not low <= key[0] < high:
            continue
        if (key < mark) if older else (key > mark):
            kept.append(row)
    kept.sort(key=lambda r: (order_time(r, order), r.id), reverse=older)
    return kept[: params["limit"]]
