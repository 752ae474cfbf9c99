"""The schema's names as the protocol fixes them, written down once for every test.

What the tests expect, independent of the engine's code: the migration ledger
each dialect records (file names with extension; SQLite has no 0003,
docs/protocol-notes.md "Schema and migrations"), the indexes on
``cairnq_tasks`` after every migration, and the statement files each dialect
ships.
"""

from __future__ import annotations

from engine._sql import Dialect, sql_root

POSTGRES_MIGRATIONS = [
    "0001_init.sql",
    "0002_purge_index.sql",
    "0003_notify.sql",
    "0004_lease_index.sql",
    "0005_clear_terminal_lease.sql",
    "0006_claim_name_index.sql",
    "0007_purge_status_index.sql",
    "0008_claim_due_index.sql",
    "0009_purge_queue_index.sql",
    "0010_drop_status_index.sql",
]
SQLITE_MIGRATIONS = [name for name in POSTGRES_MIGRATIONS if name != "0003_notify.sql"]
MIGRATIONS: dict[Dialect, list[str]] = {
    "sqlite": SQLITE_MIGRATIONS,
    "postgres": POSTGRES_MIGRATIONS,
}

#: The indexes on ``cairnq_tasks`` after every migration (besides its primary key).
TASK_INDEXES = frozenset(
    {
        "cairnq_tasks_claim_idx",
        "cairnq_tasks_claim_name_idx",
        "cairnq_tasks_name_idx",
        "cairnq_tasks_root_idx",
        "cairnq_tasks_correlation_idx",
        "cairnq_tasks_completed_idx",
        "cairnq_tasks_lease_idx",
        "cairnq_tasks_status_completed_idx",
        "cairnq_tasks_queue_completed_idx",
    }
)


def statement_names(dialect: Dialect) -> frozenset[str]:
    """Every statement name the dialect ships (one file each, ``sql/<dialect>/``)."""
    return frozenset(p.stem for p in (sql_root() / dialect).glob("*.sql"))
