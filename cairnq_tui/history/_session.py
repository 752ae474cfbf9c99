"""A console session's history: the file, the recorder and the auditor of one target.

``open_history`` opens (or creates) the target's file under the state directory;
the app samples through ``sample()`` every ``SAMPLE_EVERY_S`` (right after a
refresh tick has drawn: ``history_host``) and writes through ``client()``, whose
writes are audited.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from cairnq_tui.formatting import clean
from cairnq_tui.history._audit import AuditedClient, Auditor
from cairnq_tui.history._file import HistoryFile
from cairnq_tui.history._paths import history_path, target_identity
from cairnq_tui.history._recorder import Recorder
from engine import CairnQ, TaskStore
from engine.inspection import Inspector
from engine.store import redact_dsn

#: Seconds between two samples while the console runs.
SAMPLE_EVERY_S = 10.0


class HistorySession:
    """The history file of the console's current target, and what writes to it."""

    def __init__(self, file: HistoryFile, inspector: Inspector, clock: Callable[[], int]):
        self.file = file
        self.recorder = Recorder(inspector, file, clock)
        self.auditor = Auditor(file, file.target, clock)
        #: The last sample's failure (None after a good one): shown, never raised.
        self.last_error: str | None = None

    @property
    def path(self) -> Path:
        return self.file.path

    def client(self, store: TaskStore) -> AuditedClient:
        return AuditedClient(store, self.auditor)

    async def sample(self) -> None:
        try:
            await self.recorder.sample()
            self.last_error = None
        except (OSError, sqlite3.Error) as exc:
            self.last_error = redact_dsn(f"{type(exc).__name__}: {exc}")
        except Exception as exc:  # the database is away: the refresh says so already
            self.last_error = redact_dsn(f"{type(exc).__name__}: {exc}")

    def close(self) -> None:
        self.file.close()


def open_history(
    dialect: str,
    location: str,
    schema: str | None,
    inspector: Inspector,
    clock: Callable[[], int],
    *,
    env: Mapping[str, str] | None = None,
) -> HistorySession:
    """Open the target's history file (created 0600 on first use).

    Raises:
        OSError, sqlite3.Error: the state directory or file cannot be used.
    """
    identity = target_identity(dialect, location, schema)
    display = identity if dialect == "sqlite" else redact_dsn(identity)
    file = HistoryFile(history_path(identity, env), target=display)
    return HistorySession(file, inspector, clock)


def history_for(
    settings: Any, store: TaskStore, inspector: Inspector, clock: Callable[[], int]
) -> tuple[HistorySession | None, CairnQ, str | None]:
    """What a console on ``settings.target`` writes through: its history session
    (None with ``settings.history`` off, or when the file cannot be opened), the
    client (audited when there is a session), and why there is no file, if it failed.
    """
    if not settings.history:
        return None, CairnQ(store), None
    target = settings.target
    try:
        session = open_history(target.dialect, target.raw, target.schema, inspector, clock)
    except (OSError, sqlite3.Error) as exc:
        return None, CairnQ(store), redact_dsn(clean(f"{type(exc).__name__}: {exc}"))
    return session, session.client(store), None
