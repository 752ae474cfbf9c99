"""A write the database has not answered yet: shown as pending, and abandonable.

Once a write has waited ``PENDING_AFTER_S`` a dialog says what is waiting and for
how long; escape abandons it. Abandoning cancels the write's worker:

* a statement not yet sent (waiting for a connection, or for the one before it
  in a batch) is never sent;
* a statement already sent cannot be called back for certain: psycopg asks the
  server to cancel it, but while the connection hangs neither that request nor
  the statement's answer gets through, and the server may still commit it when
  the connection comes back.

So the console does not claim "nothing happened". It says which of the two it
cannot tell apart, and once the abandoned worker has ended and the database
answers again it reads the write's tasks and reports what they are now: a write
that did land after it was abandoned is reported, never silent.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from textual.worker import Worker as TextualWorker
from textual.worker import WorkerCancelled, WorkerFailed

from cairnq_tui.messages import ControlFinished
from cairnq_tui.screens.pending import PendingWriteScreen

if TYPE_CHECKING:
    from cairnq_tui.controls._host import ControlHost

#: A write that has not finished after this long is shown as pending.
PENDING_AFTER_S = 1.0
#: How often the check after an abandon asks the database again.
CHECK_EVERY_S = 1.0

#: Reads what an abandoned write's tasks are now: one sentence.
Verify = Callable[[], Awaitable[str]]


class PendingWrite:
    """One write in flight, from its start until it ends or is abandoned."""

    def __init__(self, app: ControlHost, what: str, verify: Verify | None) -> None:
        self.app = app
        self.what = what
        self.verify = verify
        self.worker: TextualWorker[Any] | None = None
        self.started = time.monotonic()
        #: True once the write's job has returned or raised (or unwound after an abandon).
        self.ended = False
        self.abandoned = False
        self.screen: PendingWriteScreen | None = None

    @property
    def waiting(self) -> bool:
        """Still waiting on the database, and not given up."""
        return not self.ended and not self.abandoned

    def watch(self) -> None:
        self.app.set_timer(PENDING_AFTER_S, self._show)

    def _show(self) -> None:
        if not self.waiting:
            return
        self.screen = PendingWriteScreen(self.what, self.started)
        self.app.push_screen(self.screen, self._answered)

    def finished(self) -> None:
        """The write's job ended (on the app's loop): close the pending dialog."""
        self.ended = True
        screen, self.screen = self.screen, None
        if screen is not None and screen.is_attached and not self.abandoned:
            screen.dismiss(False)

    def _answered(self, abandon: bool | None) -> None:
        if abandon and self.waiting:
            self.abandon()

    def abandon(self) -> None:
        """Stop waiting: cancel the worker, say what that can and cannot undo, check."""
        self.abandoned = True
        waited = time.monotonic() - self.started
        if self.worker is not None:
            self.worker.cancel()
        checking = (
            " The console reads its tasks again once the database answers and says "
            "what they are then."
            if self.verify is not None
            else " Look at the tasks once the database answers."
        )
        self.app.notify(
            f"Abandoned after {waited:.0f}s: {self.what}. Whatever had not been sent "
            "is never sent; a statement already sent may still be applied by the "
            f"database when the connection comes back.{checking}",
            title="Write abandoned",
            severity="warning",
            timeout=20,
            markup=False,
        )
        if self.verify is not None:
            self.app.run_worker(self._check(), group="verify", exit_on_error=False)

    async def _check(self) -> None:
        if self.worker is not None:
            with contextlib.suppress(WorkerCancelled, WorkerFailed):
                await self.worker.wait()  # psycopg's cancel request ends or times out
        verify = self.verify
        assert verify is not None
        while True:
            try:
                found = await verify()
            except Exception:  # the database still does not answer: ask again
                await asyncio.sleep(CHECK_EVERY_S)
                continue
            break
        self.app.post_message(
            ControlFinished(f"After the abandoned write ({self.what}): {found}", "warning")
        )
