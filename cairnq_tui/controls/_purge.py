"""Purge: the form (its preview counts first), a confirmation, then batches of 1,000."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from cairnq_tui import actions
from cairnq_tui.controls._write_path import WritePath
from cairnq_tui.formatting import duration
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

    async def _purge(self, request: PurgeRequest) -> None:
        rule = actions.PurgeRule(request.older_than_ms, request.queue, request.status, request.name)
        total = await actions.purge(self.app.client, rule)
        self._finish(f"Purged {total:,} task(s).")
