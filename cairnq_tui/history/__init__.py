"""The console's history file: what it saw over time and what it wrote.

One SQLite file per target under ``$XDG_STATE_HOME/cairnq-tui`` (or
``~/.local/state/cairnq-tui``), named by a hash of the target without its
password, created 0600, bounded in age (7 days) and size (50 MB). It holds the
recorder's samples of per-(queue, name, status) counts (what changed, sample by
sample), the failed attempts it saw, the workers it saw, and the audit trail of
the console's writes. ``--no-history`` turns it off. Never inside
the cairnq database, which other SDKs share.
"""

from cairnq_tui.history._audit import AuditedClient, Auditor, os_user
from cairnq_tui.history._file import (
    DEFAULT_MAX_AGE_MS,
    DEFAULT_MAX_BYTES,
    AuditEntry,
    HistoryFile,
    SeenFailure,
    SeenWorker,
)
from cairnq_tui.history._paths import history_path, state_dir, target_identity
from cairnq_tui.history._recorder import Recorder
from cairnq_tui.history._session import (
    SAMPLE_EVERY_S,
    HistorySession,
    history_for,
    open_history,
)

__all__ = [
    "DEFAULT_MAX_AGE_MS",
    "DEFAULT_MAX_BYTES",
    "SAMPLE_EVERY_S",
    "AuditEntry",
    "AuditedClient",
    "Auditor",
    "HistoryFile",
    "HistorySession",
    "Recorder",
    "SeenFailure",
    "SeenWorker",
    "history_for",
    "history_path",
    "open_history",
    "os_user",
    "state_dir",
    "target_identity",
]
