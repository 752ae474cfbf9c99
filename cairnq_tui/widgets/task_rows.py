"""What the views listing tasks share: Enter on a row opens that row's task.

(Control keys off in a read-only session, and the rest every view shares, are
in ``view_bases.py``.)
"""

from __future__ import annotations

from cairnq_tui.widgets.keyed_table import KeyedTable


class OpensTaskRows:
    """Mixin for a view whose table rows are tasks: Enter runs ``action_open_task``."""

    def action_open_task(self) -> None:
        raise NotImplementedError

    def on_keyed_table_row_selected(self, event: KeyedTable.RowSelected) -> None:
        event.stop()
        self.action_open_task()
