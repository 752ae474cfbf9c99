"""What the views listing tasks share with each other and with the task detail.

A control's key (cancel, retry, replace, submit, purge …) does nothing in a
read-only session and shows dimmed in the footer; Enter on a row opens that
row's task.
"""

from __future__ import annotations

from typing import Any

from cairnq_tui import keymap
from cairnq_tui.widgets.keyed_table import KeyedTable


class ReadOnlyControls:
    """Mixin: control actions are off while the session is read-only."""

    app: Any

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if self.app.read_only and action in keymap.CONTROL_ACTIONS:
            return None  # shown dimmed in the footer, does nothing
        return True


class OpensTaskRows(ReadOnlyControls):
    """Mixin for a view whose table rows are tasks: Enter runs ``action_open_task``."""

    def action_open_task(self) -> None:
        raise NotImplementedError

    def on_data_table_row_selected(self, event: KeyedTable.RowSelected) -> None:
        event.stop()
        self.action_open_task()
