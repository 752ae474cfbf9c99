"""The In-flight calls view: every handler call the hosted workers are running now.

A batch call carries several tasks; its row shows the first id and how many
more. Lease left counts down with the console's clock between heartbeats.
Below them, the ``def`` handler threads a worker gave up on (``max_run_ms``)
that still run: they hold no slot, but the function has not returned.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult

from cairnq_tui.formatting import age, duration, lease_left, progress_bar, safe_text
from cairnq_tui.widgets.hosted_view import HostedView
from cairnq_tui.widgets.keyed_table import KeyedTable
from engine.snapshots import AbandonedThread, CallSnapshot

COLUMNS = [
    ("Call", "call"),
    ("Name", "name"),
    ("Tasks", "tasks"),
    ("Elapsed", "elapsed"),
    ("Lease left", "lease"),
    ("Last beat", "beat"),
    ("Flags", "flags"),
    ("Progress", "progress"),
    ("Message", "message"),
]


def _flags(call: CallSnapshot) -> Text:
    flags = []
    if call.cancel_requested:
        flags.append(("cancel requested", "magenta"))
    if call.lost:
        flags.append(("lease lost", "bold red"))
    if not flags:
        return Text("—", style="dim")
    return Text(", ").join(Text(t, style=s) for t, s in flags)


def _progress(call: CallSnapshot) -> tuple[float | None, str]:
    reported = [t for t in call.tasks if t.progress is not None or t.message]
    if not reported:
        return None, ""
    last = reported[-1]
    return last.progress, last.message or ""


class CallsView(HostedView):
    """One row per call in flight, oldest first."""

    def compose_body(self) -> ComposeResult:
        yield KeyedTable(COLUMNS, id="calls-table")

    def draw(self) -> None:
        now = self.now()
        rows = []
        calls = [(s.spec, c) for s in self.statuses if s.snapshot for c in s.snapshot.calls]
        calls.sort(key=lambda pair: (pair[1].started_at_ms, pair[1].call_id))
        for spec, call in calls:
            more = f" +{len(call.task_ids) - 1}" if len(call.task_ids) > 1 else ""
            progress, message = _progress(call)
            rows.append(
                (
                    f"{spec}/{call.call_id}",
                    [
                        Text(f"{call.call_id}"),
                        safe_text(call.name, limit=32),
                        Text((call.task_ids[0] if call.task_ids else "—") + more),
                        Text(duration(max(0, now - call.started_at_ms))),
                        lease_left(call.lease_until_ms, now),
                        Text(age(call.last_heartbeat_ms, now)),
                        _flags(call),
                        progress_bar(progress),
                        safe_text(message, limit=48),
                    ],
                )
            )
        abandoned = [
            (s.spec, a) for s in self.statuses if s.snapshot for a in s.snapshot.abandoned_threads
        ]
        abandoned.sort(key=lambda pair: pair[1].abandoned_at_ms)
        rows.extend(_abandoned_row(spec, thread, now) for spec, thread in abandoned)
        self.query_one("#calls-table", KeyedTable).sync(rows)


def _abandoned_row(spec: str, thread: AbandonedThread, now: int) -> tuple[str, list[Text]]:
    """A thread still running a call its worker gave up on."""
    more = f" +{len(thread.task_ids) - 1}" if len(thread.task_ids) > 1 else ""
    given_up = duration(max(0, now - thread.abandoned_at_ms))
    return (
        f"{spec}/abandoned/{thread.thread_name}/{thread.started_at_ms}/{thread.task_ids}",
        [
            Text(thread.thread_name, style="dim"),
            safe_text(thread.name, limit=32),
            Text((thread.task_ids[0] if thread.task_ids else "—") + more),
            Text(duration(max(0, now - thread.started_at_ms))),
            Text("—", style="dim"),
            Text("—", style="dim"),
            Text("abandoned, still running", style="bold red"),
            Text(""),
            Text(f"given up {given_up} ago; holds no slot", style="dim"),
        ],
    )
