"""What the Inspector's helpers use of it: its reads, its bounds, its clock.

``Inspector`` (``_inspector.py``) calls the helpers that build its bigger
answers (``_fleet``, ``_metrics``, ``_task_order``, ``_triage``); they read
through it. They name it by this protocol, not by its class, so the
dependency runs one way (the Inspector imports them, never the reverse).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from engine._inspect_types import CappedCount, TaskFilter, TaskSummary


class InspectorReads(Protocol):
    """The part of ``Inspector`` its helpers read through."""

    #: Epoch ms, the console's clock.
    clock: Callable[[], int]
    #: Tasks read per page by a payload text search.
    payload_scan: int
    #: The newest failures the failure groups read at most.
    error_window: int
    #: The newest failures an error search reads at most.
    search_window: int
    #: (valid until, monotonic s; floor_ms; failures held) of the error window.
    window_edge: tuple[float, int, int] | None

    async def _read(self, name: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        """One named ``inspect_*`` statement's rows."""
        ...

    def _cap(self, cap: int | None) -> int:
        """``cap``, or the count cap for None; ``ValueError`` below 1."""
        ...

    async def count_tasks(self, flt: TaskFilter, *, cap: int | None = None) -> CappedCount | None:
        """How many tasks match ``flt``, up to ``cap``."""
        ...

    async def with_errors(self, rows: Sequence[TaskSummary]) -> list[TaskSummary]:
        """``rows`` with the error columns of failed and retrying tasks filled."""
        ...
