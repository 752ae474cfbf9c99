"""What only a hosted worker knows about why a queued task is not running.

The database says a task is due; the worker's snapshot says whether anything in
this process will claim it now: no hosted worker handles the name, the worker
is paused or stopped, the name is at its own concurrency cap, the worker is
full, or the name's resource is held by other calls.
"""

from __future__ import annotations

from collections.abc import Sequence

from cairnq_tui.formatting import quoted
from cairnq_tui.hosting._host import HostedStatus
from engine.snapshots import NameSnapshot, WorkerSnapshot


def _holders(snapshot: WorkerSnapshot, resource: str) -> str:
    for res in snapshot.resources:
        if res.name != resource:
            continue
        held = [
            f"{h.name} ({', '.join(h.task_ids[:2])}{'…' if len(h.task_ids) > 2 else ''})"
            for h in res.holders
        ]
        return "; ".join(held[:3]) + (f" and {len(held) - 3} more" if len(held) > 3 else "")
    return "?"


def _resource_full(snapshot: WorkerSnapshot, resource: str) -> bool:
    return any(r.name == resource and r.held >= r.capacity for r in snapshot.resources)


def _name_reasons(status: HostedStatus, snapshot: WorkerSnapshot, name: NameSnapshot) -> list[str]:
    who = f"hosted worker {status.spec}"
    if status.state in ("paused", "draining", "stopped", "failed", "starting"):
        return [f"{who} is {status.state}"]
    reasons = []
    if name.resource is not None and _resource_full(snapshot, name.resource):
        reasons.append(
            f"blocked on resource {name.resource} (held by {_holders(snapshot, name.resource)})"
        )
    if name.concurrency is not None and name.calls_in_flight >= name.concurrency:
        reasons.append(
            f"task name {quoted(name.name)} is at its concurrency cap "
            f"({name.calls_in_flight}/{name.concurrency})"
        )
    if snapshot.concurrency_used >= snapshot.concurrency_limit:
        reasons.append(
            f"{who} is full ({snapshot.concurrency_used}/{snapshot.concurrency_limit} calls)"
        )
    return reasons


def hosted_reasons(
    name: str, queue: str, status: str, statuses: Sequence[HostedStatus]
) -> list[str]:
    """Reasons, from the hosted workers, that a task of ``name`` on ``queue`` waits.

    Only a queued task gets reasons (a due date or a lease is the database's
    story). With no hosted worker at all there is nothing to add: other
    processes may be working the queue. Every reason starts with a word of
    ours, never with a name from the database or a worker, so a caller may
    capitalise its first letter without changing a name (``iPhone`` stays
    ``iPhone``).
    """
    if status != "queued" or not statuses:
        return []
    reasons: list[str] = []
    handled = False
    for hosted in statuses:
        snapshot = hosted.snapshot
        if snapshot is None or queue not in snapshot.queues:
            continue
        for registered in snapshot.names:
            if registered.name == name:
                handled = True
                reasons.extend(_name_reasons(hosted, snapshot, registered))
    if not handled:
        return [f"no hosted worker handles {quoted(name)} on queue {quoted(queue)}"]
    return reasons
