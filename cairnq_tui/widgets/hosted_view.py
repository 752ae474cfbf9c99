"""What every hosted-worker view shares: the workers strip, the refresh, the controls.

A hosted view reads ``app.host`` (a ``WorkerHost``, None without ``--worker``):
each refresh awaits every hosted worker's ``HostedStatus`` (a hop to the
worker's own loop, no database) plus whatever the view reads from the database
through the Inspector, and posts one ``HostedRefreshed``. The controls act on
the selected hosted worker (``W`` moves the selection) and run in workers of
their own, so a drain that waits for slow calls never blocks the console.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.message import Message
from textual.widgets import Static

from cairnq_tui import keymap
from cairnq_tui.formatting import clean, duration
from cairnq_tui.hosting import HostedStatus, HostedWorker, HostError, WorkerHost
from cairnq_tui.messages import DataMessage
from cairnq_tui.widgets.view_bases import DataView
from engine.inspection import CappedCount, TaskFilter
from engine.snapshots import WaitSnapshot, WorkerSnapshot

#: Backlog counts stop here (a count must never scan a whole table).
BACKLOG_CAP = 10_000
NO_HOST = (
    "No hosted worker. Host your own with `cairnq-tui launch TARGET --worker MODULE:ATTR`, "
    "or try `cairnq-tui demo`."
)
STATE_STYLES = {
    "running": "bold green",
    "paused": "bold yellow",
    "draining": "bold magenta",
    "starting": "cyan",
    "stopped": "dim",
    "failed": "bold red",
}


@dataclass
class HostedRefreshed(DataMessage):
    """Hosted statuses, the waits registry, and queued counts per task name."""

    statuses: list[HostedStatus]
    waits: list[WaitSnapshot] = field(default_factory=list)
    backlog: dict[str, CappedCount] = field(default_factory=dict)


@dataclass
class HostedChanged(Message):
    """A hosted worker's state changed (pushed by the host from its thread)."""

    status: HostedStatus


def drain_waits(snapshot: WorkerSnapshot, now_ms: int) -> str:
    """What a draining worker still waits for: its calls in flight, by name."""
    by_name: dict[str, list[int]] = {}
    for call in snapshot.calls:
        by_name.setdefault(call.name, []).append(call.started_at_ms)
    if not by_name:
        return "drain: no call left, stopping"
    parts = [
        f"{clean(name)} ×{len(starts)} (oldest {duration(max(0, now_ms - min(starts)))})"
        for name, starts in sorted(by_name.items(), key=lambda item: min(item[1]))
    ]
    calls = len(snapshot.calls)
    return f"drain waits for {calls} call{'s' * (calls != 1)}: " + ", ".join(parts[:5])


def worker_line(status: HostedStatus, selected: bool, now_ms: int | None = None) -> Text:
    """One hosted worker in the strip above each hosted view."""
    snap = status.snapshot
    parts: list[Text | str | tuple[str, str]] = [
        ("▶ " if selected else "  ", "bold"),
        (clean(status.spec), "bold" if selected else ""),
        "  ",
        (status.state, STATE_STYLES.get(status.state, "")),
    ]
    if snap is not None:
        parts.append(
            f"  calls {snap.concurrency_used}/{snap.concurrency_limit}"
            f"  polls {snap.polls:,}  claimed {snap.tasks_claimed:,}"
        )
        parts.extend(_abandoned(snap))
    if status.loop_lag_ms >= 50:
        parts.append((f"  loop blocked {duration(status.loop_lag_ms)}", "bold red"))
    if status.stale:
        parts.append(("  (stale)", "dim"))
    if status.error:
        parts.append(("\n    " + clean(status.error), "red"))
    if snap is not None and status.state == "draining":
        now = now_ms if now_ms is not None else int(time.time() * 1000)
        parts.append(("\n    " + drain_waits(snap, now), "yellow"))
    return Text.assemble(*parts)


def _abandoned(snap: WorkerSnapshot) -> list[tuple[str, str]]:
    """The ``def`` handler threads given up on: those still running, and how many ever."""
    now, ever = len(snap.abandoned_threads), snap.abandoned_total
    if now:
        return [
            (f"  {now} abandoned thread{'s' * (now != 1)} still running ({ever} ever)", "bold red")
        ]
    if ever:
        return [(f"  abandoned threads 0 ({ever} ever)", "dim")]
    return []


class HostedView(DataView):
    """Base of the Quotas, Resources, Calls, Waits and Errors views."""

    BINDINGS = keymap.HOSTED
    #: Whether the view needs queued counts per registered name.
    wants_backlog = False

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.statuses: list[HostedStatus] = []
        self.waits: list[WaitSnapshot] = []
        self.backlog: dict[str, CappedCount] = {}
        #: The last state change each hosted worker pushed (``status_changed``).
        self._pushed: dict[str, HostedStatus] = {}

    def compose(self) -> ComposeResult:
        yield Static("", classes="hosted-workers")
        yield from self.compose_body()

    def compose_body(self) -> ComposeResult:
        """The view's own widgets, below the workers strip."""
        return iter(())

    @property
    def host(self) -> WorkerHost | None:
        return self.console.host

    async def read(self) -> HostedRefreshed:
        statuses = await self.host.statuses() if self.host else []
        waits = self.console.wait_registry()
        backlog = await self._backlog(statuses) if self.wants_backlog else {}
        return HostedRefreshed(0.0, statuses, waits, backlog)

    async def _backlog(self, statuses: Sequence[HostedStatus]) -> dict[str, CappedCount]:
        names = sorted({n for s in statuses for n in s.handles})
        counts: dict[str, CappedCount] = {}
        for name in names:
            flt = TaskFilter(status="queued", name=name)
            count = await self.console.inspector.count_tasks(flt, cap=BACKLOG_CAP)
            if count is not None:
                counts[name] = count
        return counts

    def status_changed(self, status: HostedStatus) -> None:
        """A hosted worker's state changed: show it in the strip now, not at the next tick."""
        self._pushed[status.spec] = status
        if any(s.spec == status.spec for s in self.statuses):
            self.statuses = [self._newer(s) for s in self.statuses]
            self._draw_workers()

    def _newer(self, status: HostedStatus) -> HostedStatus:
        """``status``, or the change pushed since it was read."""
        pushed = self._pushed.get(status.spec)
        return pushed if pushed is not None and pushed.changes > status.changes else status

    def on_hosted_refreshed(self, message: HostedRefreshed) -> None:
        # A refresh read before a change that was pushed meanwhile does not undo it.
        self.statuses = [self._newer(s) for s in message.statuses]
        self.waits = message.waits
        self.backlog = message.backlog
        self._draw_workers()
        self.drawn(message)

    def _draw_workers(self) -> None:
        strip = self.query_one(".hosted-workers", Static)
        if not self.statuses:
            strip.update(Text(NO_HOST, style="dim"))
            return
        index = self.selected_index()
        now = self.now()
        lines = [worker_line(s, i == index, now) for i, s in enumerate(self.statuses)]
        strip.update(Text("\n").join(lines))

    def draw(self) -> None:
        """Draw the view's body from ``statuses``/``waits``/``backlog``."""

    def now(self) -> int:
        return int(self.console.clock())

    # -- controls on the selected hosted worker ------------------------------------------

    def selected_index(self) -> int:
        count = len(self.host.workers) if self.host else 0
        return self.console.hosted_index % count if count else 0

    def selected(self) -> HostedWorker | None:
        if not self.host:
            return None
        workers: Sequence[HostedWorker] = self.host.workers
        return workers[self.selected_index()]

    def _status_of(self, hosted: HostedWorker) -> HostedStatus | None:
        return next((s for s in self.statuses if s.spec == str(hosted.spec)), None)

    @work(group="hosted-control", exit_on_error=False)
    async def _control(self, what: str, act: Callable[[HostedWorker], Awaitable[None]]) -> None:
        hosted = self.selected()
        if hosted is None:
            self.app.notify(NO_HOST, severity="warning")
            return
        self.app.notify(f"{what}: {hosted.spec}…", timeout=2)
        job = asyncio.ensure_future(act(hosted))
        # The new state (draining, paused …) is set as the control starts on the
        # hosted loop: show it now, not when the control returns (a drain returns
        # when its calls have finished) or at the next tick.
        await asyncio.sleep(0)  # the control is sent to the hosted loop
        await self._show_states()
        try:
            await job
        except HostError as exc:
            self.app.notify(clean(str(exc)), title=f"{what} failed", severity="error", timeout=10)
        except ValueError as exc:
            self.app.notify(clean(str(exc)), title=f"{what} refused", severity="error")
        else:
            self.app.notify(f"{what}: {hosted.spec} done", timeout=2)
        self.console.refresh_now(force=True)

    async def _show_states(self) -> None:
        """Read the hosted workers' states (no database) and redraw the strip."""
        if self.host:
            # The first read may reach the hosted loop before the control's first
            # step (which that loop schedules as it takes the control in); the
            # second is queued behind that step.
            await self.host.statuses()
            self.statuses = [self._newer(s) for s in await self.host.statuses()]
            self._draw_workers()

    def action_hosted_toggle_pause(self) -> None:
        hosted = self.selected()
        status = self._status_of(hosted) if hosted is not None else None
        if status is not None and status.state == "paused":
            self._control("Resume", lambda h: h.resume())
        else:
            self._control("Pause", lambda h: h.pause())

    def action_hosted_drain(self) -> None:
        self._control("Drain and stop", lambda h: h.drain())

    def action_hosted_restart(self) -> None:
        self._control("Restart", lambda h: h.restart())

    def action_hosted_reload(self) -> None:
        self._control("Reload", lambda h: h.reload())

    def _concurrency(self, delta: int) -> None:
        hosted = self.selected()
        status = self._status_of(hosted) if hosted is not None else None
        if status is None or status.snapshot is None:
            return
        target = max(1, status.snapshot.concurrency_limit + delta)
        self._control(f"Concurrency {target}", lambda h: h.set_concurrency(target))

    def action_hosted_more(self) -> None:
        self._concurrency(+1)

    def action_hosted_less(self) -> None:
        self._concurrency(-1)

    def action_hosted_next(self) -> None:
        self.console.hosted_index += 1
        self._draw_workers()
        self.draw()
