"""The values failure triage answers with: failure groups, a group's selection,
workers as the rows show them, and the windows these reads cover.

Plain frozen dataclasses, re-exported by ``engine.inspection``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: The windows the console offers, by label; None = everything retained.
WINDOWS: dict[str, int | None] = {
    "1h": 3_600_000,
    "6h": 6 * 3_600_000,
    "24h": 24 * 3_600_000,
    "7d": 7 * 24 * 3_600_000,
    "all": None,
}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)\s*$")
_ZERO = re.compile(r"^\s*0+(?:\.0+)?\s*(?:ms|s|m|h|d|w)?\s*$")
_UNIT_MS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}
#: The longest duration taken (the protocol's limit on a time in ms).
_MAX_MS = 2**62


def parse_duration(text: str, *, zero: bool = False) -> int:
    """``"15m"``, ``"24h"``, ``"1.5h"``, ``"30s"``, ``"500ms"``, ``"2w"`` -> milliseconds.

    The one reader of every duration the console and the command line take. A
    number needs its unit: a bare ``7`` is refused rather than read as 7 ms
    (``purge --older-than 7`` would otherwise purge nearly everything). ``zero``
    also takes ``0`` (with or without a unit), where zero means something:
    "any age" for a purge cutoff, "now" for a delay.

    Raises:
        ValueError: anything else, a zero duration unless ``zero``, or a duration
            above 2**62 ms.
    """
    if not isinstance(text, str):
        raise ValueError(f"{text!r} is not a duration")
    if zero and _ZERO.match(text):
        return 0
    match = _DURATION.match(text)
    if match is None:
        raise ValueError(
            f"{text!r} is not a duration; use a number and a unit: ms, s, m, h, d or w "
            f"(e.g. 15m, 24h, 7d{'; 0 for none' if zero else ''})"
        )
    ms = round(float(match.group(1)) * _UNIT_MS[match.group(2)])
    if ms <= 0:
        raise ValueError(f"{text!r}: a duration must be above zero")
    if ms > _MAX_MS:
        raise ValueError(f"{text!r}: a duration must be at most 2**62 ms")
    return ms


@dataclass(frozen=True, slots=True)
class FailureGroup:
    """Failed tasks of one name whose errors differ only in volatile parts.

    ``message`` is the first line of the error message with numbers, hex, uuids
    and ids masked (``<n>``, ``<hex>``, ``<uuid>``, ``<id>``). ``buckets`` counts
    the group's failures per bucket of the window, oldest first (a sparkline).
    ``example_id`` is the group's most recent failed task.
    """

    name: str
    error_type: str
    message: str
    count: int
    first_seen_ms: int
    last_seen_ms: int
    example_id: str
    buckets: tuple[int, ...]

    @property
    def key(self) -> tuple[str, str, str]:
        """What identifies the group: ``(name, error_type, masked message)``."""
        return (self.name, self.error_type, self.message)


@dataclass(frozen=True, slots=True)
class FailureGroups:
    """The failure groups of a window, most failures first.

    ``since_ms`` is where the window starts (None = everything retained);
    ``bucket_ms`` and ``bucket_start_ms`` place each group's ``buckets``.
    ``failures_read`` failures were grouped; ``capped`` means the window held
    more than ``cap`` and only the newest ``cap`` were read (a few more when
    several failed in the same millisecond as the ``cap``-th).
    """

    groups: tuple[FailureGroup, ...]
    since_ms: int | None
    until_ms: int
    bucket_ms: int
    bucket_start_ms: int
    failures_read: int
    cap: int
    capped: bool = False

    @property
    def window_note(self) -> str:
        """What was read, said plainly."""
        if self.capped:
            return f"grouped the newest {self.cap:,} failures"
        n = self.failures_read
        return f"grouped {n:,} failure{'' if n == 1 else 's'}"


@dataclass(frozen=True, slots=True)
class FailureSelection:
    """The tasks a group action (retry, cancel, purge) works on.

    ``count`` is exact within the window read (``capped`` says the window held
    more failures than the cap); ``task_ids`` holds the first ``limit`` of them,
    newest first. Use ``task_ids`` as the action's id list.
    """

    name: str
    error_type: str
    message: str
    since_ms: int | None
    count: int
    task_ids: tuple[str, ...]
    queues: tuple[str, ...]
    capped: bool

    @property
    def truncated(self) -> bool:
        """True when more tasks match than ``task_ids`` holds."""
        return self.count > len(self.task_ids)


@dataclass(frozen=True, slots=True)
class WorkerLeases:
    """A worker id as the rows show it: the running tasks it holds a lease on.

    ``shortest_lease_left_ms`` is negative once a lease has expired.
    ``expired_task_ids`` are tasks whose lease ran out unrenewed (waiting for
    lease recovery); ``stopped_heartbeating`` is True when every lease it holds
    has expired.
    """

    worker_id: str | None
    tasks: int
    names: tuple[str, ...]
    queues: tuple[str, ...]
    shortest_lease_left_ms: int
    expired_task_ids: tuple[str, ...]

    @property
    def stopped_heartbeating(self) -> bool:
        return bool(self.expired_task_ids) and len(self.expired_task_ids) == self.tasks
