"""Workers as the database sees them: every worker id holding a lease now.

Read from the running rows through the partial lease index (the statement the
leases view uses), so the cost follows the tasks running, not the table.
"""

from __future__ import annotations

from engine._inspect_reads import InspectorReads
from engine._triage_types import WorkerLeases


async def workers(inspector: InspectorReads, *, limit: int = 10_000) -> list[WorkerLeases]:
    """See ``Inspector.workers``."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"limit must be a positive integer, got {limit!r}")
    now = inspector.clock()
    rows = await inspector._read("inspect_running", {"limit": limit})
    held: dict[str | None, list[tuple[str, str, str, int]]] = {}
    for r in rows:
        entry = (str(r["id"]), str(r["name"]), str(r["queue"]), int(r["lease_until_ms"]))
        held.setdefault(r["worker_id"], []).append(entry)
    # Expired means at or before now: recovery takes ``lease_until_ms <= now`` and an
    # owned write needs ``lease_until_ms > now`` (PROTOCOL.md, the ownership predicate).
    out = [
        WorkerLeases(
            worker_id=worker_id,
            tasks=len(tasks),
            names=tuple(sorted({t[1] for t in tasks})),
            queues=tuple(sorted({t[2] for t in tasks})),
            shortest_lease_left_ms=min(t[3] for t in tasks) - now,
            expired_task_ids=tuple(t[0] for t in tasks if t[3] <= now),
        )
        for worker_id, tasks in held.items()
    ]
    # Stopped workers first, then the soonest lease to run out.
    out.sort(
        key=lambda w: (not w.stopped_heartbeating, w.shortest_lease_left_ms, w.worker_id or "")
    )
    return out
