"""The recorder: while a console runs, samples counts and notes failures into the
target's history file. Plain Python over the engine's ``Inspector`` reads (no
query of its own, no Textual).

Each ``sample()``: the per-(queue, name, status) counts of
``Inspector.name_counts`` (capped like the Queues view's; the first
``DEFAULT_NAMES_PER_QUEUE`` names per queue and status by name, the rest as
"other"): the live statuses (queued, running) read at every sample, the finished
ones (succeeded, failed, canceled: a count of the retained rows, the costly
part) every ``FINISHED_EVERY_MS`` and carried over in between; the failed tasks
completed since the last sample (``tasks_page``
sorted by completion time, ascending, from where the last one stopped, a page
at a time) with their attempt, error type and message, and the workers holding
leases. Rows a view drew with an error (a task retrying after a failure) are
noted with ``note_rows`` and written with the next sample.

Off the refresh's path: the reads run on the store's background lane
(``Inspector.in_background``: on SQLite a thread and connection of their own,
so a view's read never queues behind them), and the sample is written in one
transaction on a thread (``asyncio.to_thread``), without an fsync.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

from cairnq_tui.history._file import HistoryFile, SeenFailure
from engine.inspection import Inspector, TaskFilter, TaskSummary

LIVE = ("queued", "running")
#: Failures read per sample at most (the rest are read by the next samples).
FAILURES_PER_SAMPLE = 500
#: On the first sample, failures this far back are read.
FIRST_LOOK_BACK_MS = 3_600_000
#: How often the file is pruned (by age and size).
PRUNE_EVERY_MS = 600_000
#: How often the counts of finished tasks are read (the live ones: every sample).
FINISHED_EVERY_MS = 600_000


def seen_failure(row: TaskSummary) -> SeenFailure:
    at = row.completed_at_ms if row.completed_at_ms is not None else row.updated_at_ms
    return SeenFailure(
        task_id=row.id,
        attempt=row.attempt,
        name=row.name,
        queue=row.queue,
        status=row.status,
        error_type=row.error_type,
        message=row.error_message,
        at_ms=at,
    )


class Recorder:
    """Samples one target into its history file."""

    def __init__(self, inspector: Inspector, history: HistoryFile, clock: Callable[[], int]):
        self.inspector = inspector.in_background()
        self.history = history
        self.clock = clock
        #: Failures completed from this time on are read by the next sample.
        self.failures_since: int | None = None
        self.samples = 0
        self._noted: dict[tuple[str, int], SeenFailure] = {}
        self._pruned_at = -PRUNE_EVERY_MS
        #: The last counts of finished tasks, and when they were read.
        self._finished: dict[tuple[str, str | None, str], int] = {}
        self._finished_at: int | None = None

    def note_rows(self, rows: Iterable[TaskSummary]) -> None:
        """Rows a view showed: the ones carrying an error are failures seen."""
        for row in rows:
            if row.error_type is not None or row.error_message is not None:
                failure = seen_failure(row)
                self._noted[(failure.task_id, failure.attempt)] = failure
        if len(self._noted) > 10_000:  # (a sample writes them; this only bounds memory)
            self._noted = dict(list(self._noted.items())[-5_000:])

    async def sample(self) -> int:
        """Take one sample; returns the failures written that were new."""
        now = self.clock()
        due = self._finished_at is None or not 0 <= now - self._finished_at < FINISHED_EVERY_MS
        read = await self.inspector.name_counts(live=not due)
        counts = {cell: n.value for cell, n in read.items()}
        if due:
            self._finished = {c: n for c, n in counts.items() if c[2] not in LIVE}
            self._finished_at = now
        else:
            counts.update(self._finished)
        since = self.failures_since if self.failures_since is not None else now - FIRST_LOOK_BACK_MS
        page = await self.inspector.tasks_page(
            TaskFilter(status="failed", sort="completed", descending=False, since_ms=since),
            limit=FAILURES_PER_SAMPLE,
        )
        failures = [seen_failure(r) for r in page.rows]
        if page.rows:
            last = page.rows[-1].completed_at_ms
            # Inclusive next time: ties on the last millisecond are read again and
            # ignored by the file (one row per task and attempt).
            self.failures_since = last if last is not None else since
        elif self.failures_since is None:
            self.failures_since = since
        # Leases are held by running tasks: with none counted, there is no worker to read.
        running = any(status == "running" for _, _, status in counts)
        workers = [
            (w.worker_id, w.tasks, w.names, w.queues)
            for w in (await self.inspector.workers() if running else [])
            if w.worker_id is not None
        ]
        failures.extend(self._noted.values())
        self._noted.clear()
        prune = now - self._pruned_at >= PRUNE_EVERY_MS
        if prune:
            self._pruned_at = now
        new = await asyncio.to_thread(self._write, now, counts, failures, workers, prune)
        self.samples += 1
        return new

    def _write(
        self,
        now: int,
        counts: dict[tuple[str, str | None, str], int],
        failures: list[SeenFailure],
        workers: list[tuple[str, int, tuple[str, ...], tuple[str, ...]]],
        prune: bool,
    ) -> int:
        new = self.history.record_sample(now, counts, failures, workers)
        if prune:
            self.history.prune(now)
        return new
