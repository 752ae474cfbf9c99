"""The writes the console and the command line share: one implementation of each.

The console's dialogs (``controls.py``) and the ``cairnq-tui`` subcommands
(``cairnq_tui/ops``) both count with the engine's ``Inspector`` and write through
the engine's client, with the same caps and rules: a bulk cancel or retry touches
at most ``BULK_CAP`` tasks, a purge deletes terminal tasks completed before a
cutoff (or the listed ids that are terminal), in batches of ``PURGE_BATCH``. A
submit is the engine's ``submit_outcome`` (the console calls it directly;
``submit`` here turns a reject into an outcome for the command line). Nothing here imports Textual.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from engine import AlreadyExists, CairnQ, Task
from engine.inspection import Inspector, TaskFilter

#: Ids read per status lookup (``Inspector.summaries`` takes at most 1,000).
_LOOKUP_BATCH = 1_000

#: The most tasks one "all matching" cancel or retry touches.
BULK_CAP = 1_000
#: The statuses a cancel changes, and those a retry requeues.
LIVE = ("queued", "running")
RETRYABLE = ("failed", "canceled")
#: The statuses a purge may delete.
TERMINAL = ("succeeded", "failed", "canceled")
#: Tasks deleted per purge statement.
PURGE_BATCH = 1_000

#: Called after each step of a long write with (done so far, expected total or None).
Progress = Callable[[int, int | None], None]


def _no_progress(done: int, total: int | None) -> None:
    return None


async def cancel_ids(
    client: CairnQ, ids: Sequence[str], progress: Progress = _no_progress
) -> list[Task]:
    """Cancel each task of ``ids``; the tasks that changed (the others were not live)."""
    changed: list[Task] = []
    for done, task_id in enumerate(ids, start=1):
        after = await client.cancel(task_id)
        if after is not None:
            changed.append(after)
        progress(done, len(ids))
    return changed


async def retry_ids(
    client: CairnQ, ids: Sequence[str], reset: bool, progress: Progress = _no_progress
) -> list[Task]:
    """Requeue each failed or canceled task of ``ids``; the tasks that changed."""
    changed: list[Task] = []
    for done, task_id in enumerate(ids, start=1):
        after = await client.retry(task_id, reset_attempt=reset)
        if after is not None:
            changed.append(after)
        progress(done, len(ids))
    return changed


@dataclass(frozen=True, slots=True)
class PurgeRule:
    """What a purge deletes: terminal tasks completed more than ``older_than_ms`` ago
    (0: any age), optionally of one queue, status and name."""

    older_than_ms: int
    queue: str | None = None
    status: str | None = None
    name: str | None = None

    def __post_init__(self) -> None:
        if self.older_than_ms < 0:
            raise ValueError("the purge cutoff must be >= 0")
        if self.status is not None and self.status not in TERMINAL:
            raise ValueError(
                f"a purge deletes terminal tasks: status must be one of {', '.join(TERMINAL)}"
            )


async def purgeable_ids(inspector: Inspector, rule: PurgeRule, *, cap: int) -> list[str]:
    """Ids of up to ``cap`` tasks ``rule`` would delete now, the latest completed first
    (what a dry run lists; ``Inspector.count_purgeable`` counts the same rows)."""
    cutoff = inspector.clock() - rule.older_than_ms
    flt = TaskFilter(
        status=rule.status, queue=rule.queue, name=rule.name, sort="completed", until_ms=cutoff
    )
    wanted = (rule.status,) if rule.status else TERMINAL
    return await inspector.matching_ids(flt, statuses=wanted, cap=cap)


async def purge(
    client: CairnQ,
    rule: PurgeRule,
    *,
    expected: int | None = None,
    limit: int | None = None,
    progress: Progress = _no_progress,
) -> int:
    """Delete what ``rule`` matches, batch by batch (at most ``limit`` when given);
    how many were deleted. ``expected`` is only passed on to ``progress``."""
    total = 0
    while limit is None or total < limit:
        batch = PURGE_BATCH if limit is None else min(PURGE_BATCH, limit - total)
        deleted = await client.purge(
            older_than_ms=rule.older_than_ms,
            queue=rule.queue,
            status=rule.status,
            name=rule.name,
            limit=batch,
        )
        total += len(deleted)
        progress(total, expected)
        if len(deleted) < batch:
            break
    return total


@dataclass(frozen=True, slots=True)
class IdSelection:
    """The given ids sorted for a purge by id, each list in the order given:
    ``terminal`` may be deleted, ``live`` are queued or running, ``missing`` are
    not in the database."""

    terminal: list[str]
    live: list[str]
    missing: list[str]


async def purge_selection(inspector: Inspector, ids: Sequence[str]) -> IdSelection:
    """Which of ``ids`` (duplicates dropped) a purge by id deletes, and which not."""
    wanted = list(dict.fromkeys(ids))
    status: dict[str, str] = {}
    for start in range(0, len(wanted), _LOOKUP_BATCH):
        for row in await inspector.summaries(wanted[start : start + _LOOKUP_BATCH]):
            status[row.id] = row.status
    return IdSelection(
        terminal=[i for i in wanted if status.get(i) in TERMINAL],
        live=[i for i in wanted if i in status and status[i] not in TERMINAL],
        missing=[i for i in wanted if i not in status],
    )


async def purge_ids(
    client: CairnQ, ids: Sequence[str], progress: Progress = _no_progress
) -> list[str]:
    """Delete the listed tasks that are terminal (the store checks again: a task
    that went live meanwhile stays), batch by batch; the ids deleted."""
    deleted: list[str] = []
    for start in range(0, len(ids), PURGE_BATCH):
        deleted += await client.purge_ids(list(ids[start : start + PURGE_BATCH]))
        progress(len(deleted), len(ids))
    return deleted


@dataclass(frozen=True, slots=True)
class Submitted:
    """What a submit did: ``outcome`` is created, reused, replaced or rejected.

    ``task`` is the new or reused task (None when rejected). ``holder_id`` and
    ``holder_status`` name what the key points at for a rejected submit;
    ``previous`` is the task a replace moved the key away from.
    """

    outcome: str
    task: Task | None
    holder_id: str | None = None
    holder_status: str | None = None
    previous: Task | None = None

    @property
    def task_id(self) -> str | None:
        return self.task.id if self.task is not None else self.holder_id


async def submit(
    client: CairnQ,
    name: str,
    payload: object,
    *,
    key: str | None,
    conflict: str,
    queue: str,
    priority: int,
    delay_ms: int,
    max_attempts: int,
) -> Submitted:
    """Submit one task through the engine's ``submit_outcome`` (what the console's
    submit calls) and say what happened; a reject is an outcome, not an error."""
    try:
        done = await client.submit_outcome(
            name,
            payload,
            key=key,
            conflict=conflict,  # type: ignore[arg-type]
            queue=queue,
            priority=priority,
            delay_ms=delay_ms,
            max_attempts=max_attempts,
        )
    except AlreadyExists as exc:
        return Submitted("rejected", None, holder_id=exc.task_id, holder_status=exc.status)
    return Submitted(done.action, done.task, previous=done.previous)
