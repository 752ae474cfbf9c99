"""Hosting workers inside the console: ``cairnq-tui launch TARGET --worker MODULE:ATTR``.

Each hosted worker runs on its own event loop in its own thread, so the console's
loop stays free for keypresses; the console reads them through ``HostedStatus``
(a ``WorkerSnapshot`` plus the host's own state) and drives them through
awaitable controls.
"""

from cairnq_tui.hosting._host import (
    DEFAULT_GRACE_S,
    HostedStatus,
    HostedWorker,
    HostState,
    WorkerHost,
)
from cairnq_tui.hosting._load import HostError, WorkerSpec
from cairnq_tui.hosting._quit import quitting_notice
from cairnq_tui.hosting._run import Runnable, run_hosting, start_hosting

__all__ = [
    "DEFAULT_GRACE_S",
    "HostError",
    "HostState",
    "HostedStatus",
    "HostedWorker",
    "Runnable",
    "WorkerHost",
    "WorkerSpec",
    "quitting_notice",
    "run_hosting",
    "start_hosting",
]
