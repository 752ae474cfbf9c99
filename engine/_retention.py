"""Retention (docs/protocol-notes.md, Client): delete old terminal tasks on a schedule.

Rules are tiered: one cutoff for every terminal row, a cutoff per status, or a
list of ``RetentionRule`` filtering on anything ``purge`` can. The sweeper sleeps
one interval before its first sweep, so opening a client never deletes anything
straight away.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine._models import TERMINAL_STATUSES
from engine._rules import at_least

if TYPE_CHECKING:
    from engine.store._base import TaskStore

OnRetentionError = Callable[[BaseException], Any]


def _check_filter(value: object, what: str) -> None:
    if value is not None and (not isinstance(value, str) or not value):
        raise ValueError(f"{what} must be a non-empty string or None, got {value!r}")


@dataclass(frozen=True, slots=True)
class RetentionRule:
    """Delete terminal tasks matching the filters once older than ``older_than_ms``.

    Raises:
        ValueError: a negative age, a non-terminal status, or an empty filter.
    """

    older_than_ms: int
    queue: str | None = None
    status: str | None = None
    name: str | None = None

    def __post_init__(self) -> None:
        at_least(self.older_than_ms, "older_than_ms", 0)
        _check_filter(self.queue, "queue")
        _check_filter(self.name, "name")
        if self.status is not None and self.status not in TERMINAL_STATUSES:
            raise ValueError(
                f"retention status must be one of {sorted(TERMINAL_STATUSES)}, got {self.status!r}"
            )


class Retention:
    """A retention policy: which terminal tasks to delete, and how often to look.

    Args:
        older_than_ms: an int (one rule over every terminal row), a
            ``{status: ms}`` mapping (one rule per listed status; other statuses
            are never swept) or a sequence of ``RetentionRule``.
        interval_ms: time between sweeps, and before the first one.
        limit: rows per ``purge`` batch.
        on_error: called with each exception a sweep raises; the schedule goes on.

    Raises:
        ValueError: no rules, ``interval_ms < 1``, ``limit < 1``, or a rule purge
            would reject.
    """

    def __init__(
        self,
        older_than_ms: int | Mapping[str, int] | Sequence[RetentionRule],
        interval_ms: int = 3_600_000,
        limit: int = 1_000,
        on_error: OnRetentionError | None = None,
    ) -> None:
        self.rules: tuple[RetentionRule, ...] = _rules_of(older_than_ms)
        if not self.rules:
            raise ValueError("retention needs at least one rule")
        self.interval_ms = at_least(interval_ms, "interval_ms", 1)
        self.limit = at_least(limit, "limit", 1)
        self.on_error = on_error

    def __repr__(self) -> str:
        return f"Retention(rules={list(self.rules)!r}, interval_ms={self.interval_ms})"


def _rules_of(spec: object) -> tuple[RetentionRule, ...]:
    if isinstance(spec, int) and not isinstance(spec, bool):
        return (RetentionRule(spec),)
    if isinstance(spec, Mapping):
        return tuple(RetentionRule(ms, status=status) for status, ms in spec.items())
    if isinstance(spec, Sequence) and not isinstance(spec, str):
        for rule in spec:
            if not isinstance(rule, RetentionRule):
                raise ValueError(f"retention rules must be RetentionRule, got {rule!r}")
        return tuple(spec)
    raise ValueError(
        f"older_than_ms must be an int, a {{status: ms}} mapping or a list of "
        f"RetentionRule, got {spec!r}"
    )


class RetentionSweeper:
    """Runs a ``Retention`` against one store until stopped."""

    def __init__(self, store: TaskStore, retention: Retention) -> None:
        self._store = store
        self._retention = retention
        self._halt = asyncio.Event()
        self._schedule: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self._schedule is not None and not self._schedule.done()

    def start(self) -> None:
        """Schedule the sweeps on the running loop (idempotent)."""
        if self._schedule is not None:
            return
        self._halt = asyncio.Event()
        self._schedule = asyncio.get_running_loop().create_task(self._every_interval())

    async def stop(self) -> None:
        """End the schedule; a sweep under way finishes the batch it is deleting first."""
        schedule, self._schedule = self._schedule, None
        if schedule is not None:
            self._halt.set()
            await schedule

    async def sweep(self) -> int:
        """Apply each rule once, in batches of ``limit``; how many rows went."""
        return sum([await self._apply(rule) for rule in self._retention.rules])

    async def _apply(self, rule: RetentionRule) -> int:
        """Purge ``rule``'s rows until a batch comes back short (or the sweeper halts)."""
        batch = self._retention.limit
        removed = 0
        full = True
        while full and not self._halt.is_set():
            gone = await self._store.purge(
                older_than_ms=rule.older_than_ms,
                queue=rule.queue,
                status=rule.status,
                name=rule.name,
                limit=batch,
            )
            removed += len(gone)
            full = len(gone) == batch
            if full:
                await asyncio.sleep(0)  # a long backlog still lets the loop breathe
        return removed

    async def _every_interval(self) -> None:
        period_s = self._retention.interval_ms / 1000
        while not await self._halted_within(period_s):
            try:
                await self.sweep()
            except Exception as exc:
                self._tell(exc)

    async def _halted_within(self, seconds: float) -> bool:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._halt.wait(), seconds)
        return self._halt.is_set()

    def _tell(self, exc: Exception) -> None:
        hook = self._retention.on_error
        if hook is None:
            return
        try:
            hook(exc)
        except Exception:  # the hook's own failure must not end the schedule
            return
