"""The Quotas view: per hosted worker and registered name, what the last poll offered
and claimed, and why a name got less than it asked for.

"Why less" is the worker's own account of the poll (``NameSnapshot.shortfall``):
the worker was full, the name hit its own cap, its resource was saturated, the
claim batch bounded it, or nothing more was due. Backlog is the queued count
for the name in the database (capped).
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult

from cairnq_tui.formatting import safe_text
from cairnq_tui.widgets.hosted_view import HostedView
from cairnq_tui.widgets.keyed_table import KeyedTable

COLUMNS = [
    ("Worker / name", "name"),
    ("Batch", "batch"),
    ("Own cap", "cap"),
    ("Resource", "resource"),
    ("Calls", "calls"),
    ("Tasks", "tasks"),
    ("Backlog", "backlog"),
    ("Offered", "offered"),
    ("Claimed", "claimed"),
    ("Why less", "why"),
]
SHORTFALL_STYLES = {
    "worker full": "yellow",
    "own cap": "yellow",
    "resource saturated": "bold magenta",
    "claim batch": "cyan",
    "nothing due": "dim",
}


#: Worker states in which the last poll's shortfall is no longer the story.
_NOT_CLAIMING = {
    "paused": "worker paused (z resumes)",
    "draining": "worker draining",
    "stopped": "worker stopped",
    "failed": "worker failed",
    "starting": "worker starting",
}


def _why_less(state: str, shortfall: str | None, calls: int) -> Text:
    """The reason a name gets less: the worker's own state first, then its last poll."""
    if state in _NOT_CLAIMING:
        text = _NOT_CLAIMING[state]
        if state == "draining":
            text += f" ({calls} call{'s' * (calls != 1)} to finish)"
        return Text(text, style="bold yellow" if state != "failed" else "bold red")
    return Text(shortfall or "—", style=SHORTFALL_STYLES.get(shortfall or "", "dim"))


def _number(value: int | None) -> Text:
    return Text("—", style="dim") if value is None else Text(f"{value:,}")


class QuotasView(HostedView):
    """One row per registered name of each hosted worker."""

    wants_backlog = True

    def compose_body(self) -> ComposeResult:
        yield KeyedTable(COLUMNS, id="quotas-table")

    def draw(self) -> None:
        rows = []
        for status in self.statuses:
            snap = status.snapshot
            if snap is None:
                continue
            for name in snap.names:
                backlog = self.backlog.get(name.name)
                at_cap = name.concurrency is not None and name.calls_in_flight >= name.concurrency
                rows.append(
                    (
                        f"{status.spec}/{name.name}",
                        [
                            safe_text(name.name, limit=40),
                            _number(name.batch),
                            Text(str(name.concurrency), style="bold yellow" if at_cap else "")
                            if name.concurrency is not None
                            else Text("—", style="dim"),
                            safe_text(name.resource or "—", "" if name.resource else "dim"),
                            Text(str(name.calls_in_flight)),
                            Text(str(name.tasks_in_flight)),
                            Text(str(backlog) if backlog is not None else "—"),
                            _number(name.offered),
                            Text(str(name.claimed)),
                            _why_less(status.state, name.shortfall, snap.concurrency_used),
                        ],
                    )
                )
        self.query_one("#quotas-table", KeyedTable).sync(rows)
