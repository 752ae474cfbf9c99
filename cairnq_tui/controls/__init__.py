"""The console's writes: submit, cancel, retry, replace, purge, each confirmed first.

Split by family (``_tasks.py``: cancel and retry; ``_submit.py``: submit and
replace; ``_purge.py``), over the one path every write takes
(``_write_path.py``: read-only refusal, the confirmation and a danger target's
name, pending and abandon in ``_pending.py``, the report). Views reach them
through the ``Controls`` port (``ports.py``); the app builds them on itself as
a ``ControlHost``.
"""

from __future__ import annotations

from cairnq_tui.controls._host import ControlHost
from cairnq_tui.controls._pending import PENDING_AFTER_S, PendingWrite
from cairnq_tui.controls._purge import PurgeControls
from cairnq_tui.controls._submit import SubmitControls
from cairnq_tui.controls._tasks import ONLY_REQUESTED, TaskControls
from cairnq_tui.controls._write_path import WritePath


class ConsoleControls(TaskControls, SubmitControls, PurgeControls):
    """Every write of the console (implements ``ports.Controls``)."""


__all__ = [
    "ONLY_REQUESTED",
    "PENDING_AFTER_S",
    "ConsoleControls",
    "ControlHost",
    "PendingWrite",
    "WritePath",
]
