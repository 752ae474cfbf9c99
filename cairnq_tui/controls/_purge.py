"""Purge: the form (its preview counts first), a confirmation, then batches of 1,000."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from cairnq_tui import actions
from cairnq_tui.controls._write_path import WritePath
from cairnq_tui.formatting import clean, duration
from cairnq_tui.ports import TaskLike
from cairnq_tui.screens.purge import PurgeRequest, PurgeScreen


class PurgeControls(WritePath):
    """Purge terminal tasks."""

    def purge(self) -> None:
        """Open the purge dialog; its preview counts before anything is deleted."""
        if not self._allowed():
            return
        self.app.push_screen(
            PurgeScreen(self.app.inspector, self.app.known_queues), self._confirm_purge
        )

    def _confirm_purge(self, request: PurgeRequest | None) -> None:
        if request is None:
            return
        lines = [
            f"{request.preview} terminal task(s) completed more than "
            f"{duration(request.older_than_ms)} ago ({request.describe()}).",
            "They are deleted for good, with the keys that point at them.",
        ]
        self.confirm_write(
            f"Purge {request.preview} task(s)?",
            lines,
            lambda _: self._purge(request),
            what=f"purge {request.preview} task(s) ({request.describe()})",
            confirm_label="Purge",
            verify=self._left_now(request),
        )

    def _left_now(self, request: PurgeRequest) -> Callable[[], Awaitable[str]]:
        async def verify() -> str:
            left = await self.app.inspector.count_purgeable(
                older_than_ms=request.older_than_ms,
                queue=request.queue,
                status=request.status,
                name=request.name,
            )
            return (
                f"{left} of the {request.preview} task(s) are still there (batches of "
                f"{actions.PURGE_BATCH:,} that committed before the abandon are gone)."
            )

        return verify

    def purge_tasks(self, tasks: Sequence[TaskLike]) -> None:
        """Purge the given tasks (a failure group's) after confirming; only finished ones go."""
        if not self._allowed() or not tasks:
            return
        ids = [t.id for t in tasks]
        lines = [f"{t.id}  {clean(t.name)}  {t.status}" for t in tasks[:12]]
        if len(tasks) > 12:
            lines.append(f"… and {len(tasks) - 12:,} more.")
        lines.append("They are deleted for good, with the keys that point at them;")
        lines.append("a task that is queued or running by then is left alone.")
        self.confirm_write(
            f"Purge {len(ids):,} task(s)?",
            lines,
            lambda _: self._purge_ids(ids),
            what=f"purge {len(ids):,} task(s)",
            confirm_label="Purge",
            verify=self._ids_left(ids),
        )

    def _ids_left(self, ids: Sequence[str]) -> Callable[[], Awaitable[str]]:
        async def verify() -> str:
            left = await self.app.inspector.summaries(list(ids))
            return f"{len(left)} of the {len(ids)} task(s) are still there."

        return verify

    async def _purge_ids(self, ids: Sequence[str]) -> None:
        deleted = await actions.purge_ids(self.app.client, ids)
        kept = len(ids) - len(deleted)
        tail = f"; {kept:,} left alone (no longer finished, or gone)" if kept else ""
        self._finish(f"Purged {len(deleted):,} task(s){tail}.")

    async def _purge(self, request: PurgeRequest) -> None:
        rule = actions.PurgeRule(request.older_than_ms, request.queue, request.status, request.name)
        total = await actions.purge(self.app.client, rule)
        self._finish(f"Purged {total:,} task(s).")
