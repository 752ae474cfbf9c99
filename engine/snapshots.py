"""Frozen views of in-process work (beyond the cairnq SDK): what a console draws.

``Worker.snapshot()`` answers a ``WorkerSnapshot`` (per registered name, per
resource, per call in flight, recent error reports, ``def`` handler threads
given up on); ``engine.active_waits()`` answers ``WaitSnapshot``s. All are
immutable and cost no database round trip.
"""

from engine._waits import WaitSnapshot
from engine._worker_snapshot import (
    AbandonedThread,
    CallSnapshot,
    CallTaskSnapshot,
    ErrorReport,
    NameSnapshot,
    ResourceHolder,
    ResourceSnapshot,
    WorkerSnapshot,
)

__all__ = [
    "AbandonedThread",
    "CallSnapshot",
    "CallTaskSnapshot",
    "ErrorReport",
    "NameSnapshot",
    "ResourceHolder",
    "ResourceSnapshot",
    "WaitSnapshot",
    "WorkerSnapshot",
]
