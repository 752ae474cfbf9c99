"""Where a target's history file lives: one SQLite file per target under the
user's state directory, named by a hash of the target with its password removed.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path

from engine.store import redact_dsn

#: The folder under the state directory that holds the history files.
FOLDER = "cairnq-tui"


def state_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_STATE_HOME/cairnq-tui`` (or ``~/.local/state/cairnq-tui``)."""
    env = os.environ if env is None else env
    base = env.get("XDG_STATE_HOME") or ""
    root = Path(base) if base and Path(base).is_absolute() else Path.home() / ".local" / "state"
    return root / FOLDER


def target_identity(dialect: str, location: str, schema: str | None) -> str:
    """What names a target in its history file: dialect, place (an absolute path,
    or the DSN with its password removed) and schema. Never holds a password."""
    if dialect == "sqlite":
        place = str(Path(location).expanduser().resolve())
    else:
        place = redact_dsn(location)
    return f"{dialect}|{place}|{schema or ''}"


def history_path(identity: str, env: Mapping[str, str] | None = None) -> Path:
    """The history file of a target (``history-<hash>.sqlite3``)."""
    digest = hashlib.sha256(identity.encode("utf-8")).hexdigest()[:20]
    return state_dir(env) / f"history-{digest}.sqlite3"
