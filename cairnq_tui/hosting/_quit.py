"""What quitting says about hosted calls still in flight.

Quitting gives the hosted workers' calls ``DEFAULT_GRACE_S`` to finish; a call
still running then is abandoned, as after a crash: its tasks stay ``running``
in the database until their leases end, and then recovery requeues them. The
console says so on screen while it waits, and in one line once it has exited.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from cairnq_tui.formatting import clean, duration
from engine.snapshots import CallSnapshot, WorkerSnapshot

#: Task ids named in the line printed on exit, at most.
_IDS_SHOWN = 5


def _by_name(calls: Sequence[CallSnapshot]) -> str:
    counts: dict[str, int] = {}
    for call in calls:
        counts[call.name] = counts.get(call.name, 0) + 1
    return ", ".join(f"{clean(name)} ×{n}" for name, n in sorted(counts.items()))


def _calls(count: int) -> str:
    return f"{count} hosted call{'s' * (count != 1)}"


def quitting_notice(snapshots: Sequence[WorkerSnapshot], grace_s: float) -> str | None:
    """The on-screen notice while quitting waits for calls in flight; None if there are none."""
    calls = [c for s in snapshots for c in s.calls]
    if not calls:
        return None
    lease = duration(max(s.lease_ms for s in snapshots if s.calls))
    return (
        f"Waiting up to {grace_s:g} s for {_calls(len(calls))} in flight "
        f"({_by_name(calls)}). Calls still running then are abandoned: their tasks "
        f"stay running until their leases end (lease {lease}), then they are retried."
    )


def left_running_line(calls: Sequence[CallSnapshot], grace_s: float) -> str | None:
    """The line printed on exit for the calls quitting abandoned; None if it abandoned none."""
    if not calls:
        return None
    ids = [task_id for call in calls for task_id in call.task_ids if task_id]
    shown = ", ".join(ids[:_IDS_SHOWN]) + (
        f" and {len(ids) - _IDS_SHOWN} more" if len(ids) > _IDS_SHOWN else ""
    )
    now_ms = int(time.time() * 1000)
    leases = [c.lease_until_ms for c in calls if c.lease_until_ms is not None]
    within = f" (within {duration(max(0, max(leases) - now_ms))})" if leases else ""
    return (
        f"cairnq-tui: quit with {_calls(len(calls))} still running after the {grace_s:g} s "
        f"grace ({_by_name(calls)}); their tasks stay running until their leases "
        f"end{within}, then they are retried: {shown}"
    )
