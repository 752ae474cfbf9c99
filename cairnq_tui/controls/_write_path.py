"""The one path every write of the console takes: allowed, confirmed, run, reported.

Each policy below lives here once, and every write passes through it, so a new
write cannot forget one:

* a read-only session refuses it (its keys are disabled too, and the store
  refuses writes);
* the confirmation says what will change and, on a ``danger = true`` target,
  asks for the target's name (``ConfirmScreen(type_name=...)``);
* it runs in a worker (group ``control``); once it has waited on the database
  for ``PENDING_AFTER_S`` a dialog shows it as pending, where escape abandons
  it (``_pending.py`` says what abandoning can and cannot undo);
* its outcome comes back as a ``ControlFinished`` message.

The writes themselves (``_tasks.py``, ``_submit.py``, ``_purge.py``) only build
the confirmation's lines and the job: they reach the database through
``confirm_write`` and nothing else.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any

from cairnq_tui.controls._host import ControlHost
from cairnq_tui.controls._pending import PendingWrite, Verify
from cairnq_tui.messages import ControlFinished
from cairnq_tui.screens.confirm import ConfirmScreen

Job = Callable[[dict[str, Any]], Coroutine[Any, Any, None]]


class WritePath:
    """Base of every family of controls: the policies each write passes through."""

    def __init__(self, app: ControlHost) -> None:
        self.app = app
        #: The write waiting on the database now, if any (one at a time).
        self.pending: PendingWrite | None = None

    # -- policies --------------------------------------------------------------------------

    def _allowed(self) -> bool:
        if self.app.read_only:
            self.app.notify("Read-only: controls are disabled.", severity="warning")
            return False
        if self.pending is not None and not self.pending.ended:
            self.app.notify(
                f"Still waiting on the database for: {self.pending.what}. "
                "Abandon it (escape in its dialog) or wait for it first.",
                severity="warning",
                markup=False,
            )
            return False
        return True

    def danger_name(self) -> str | None:
        """The name to type before any write, on a ``danger = true`` target (else None)."""
        settings = self.app.settings
        if not settings.danger:
            return None
        return settings.name or settings.target.display

    def confirm_write(
        self,
        title: str,
        lines: Sequence[str],
        job: Job,
        *,
        what: str,
        confirm_label: str,
        verify: Verify | None = None,
        reset_option: bool = False,
        back: Callable[[], None] | None = None,
        confirmed: Callable[[], None] | None = None,
    ) -> None:
        """Ask (the danger target's name too), then run ``job`` with the answer.

        Args:
            what: the write in a few words, for the pending dialog and reports.
            verify: after an abandon, reads what the write's tasks are now.
            back: run when the operator goes back instead of confirming.
            confirmed: run once confirmed, before the write starts.
        """

        def done(answer: dict[str, Any] | None) -> None:
            if answer is None:
                if back is not None:
                    back()
                return
            if confirmed is not None:
                confirmed()
            self._start_write(what, lambda: job(answer), verify)

        self.app.push_screen(
            ConfirmScreen(
                title,
                lines,
                confirm_label=confirm_label,
                reset_option=reset_option,
                type_name=self.danger_name(),
            ),
            done,
        )

    def _start_write(
        self,
        what: str,
        job: Callable[[], Awaitable[None]],
        verify: Verify | None,
    ) -> None:
        pending = PendingWrite(self.app, what, verify)

        async def run() -> None:
            try:
                await job()
            finally:
                pending.finished()

        pending.worker = self.app.run_worker(
            run(), group="control", name="write", exit_on_error=False
        )
        self.pending = pending
        pending.watch()

    # -- reads and reports -------------------------------------------------------------------

    def _read(self, job: Callable[[], Coroutine[Any, Any, None]], name: str) -> None:
        """A read a control needs before its confirmation (a count, a lookup)."""
        self.app.run_worker(job(), group="control", name=name, exit_on_error=False)

    def _finish(self, summary: str, severity: str = "information", **kwargs: Any) -> None:
        self.app.post_message(ControlFinished(summary, severity, **kwargs))
