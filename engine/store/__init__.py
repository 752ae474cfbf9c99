"""Stores: one cairnq database each, every protocol operation, per dialect.

The types a claim plan and the wake-up hub are built from (``Draw``, ``Plan``,
``NewTask``, ``Signals``) are internal: import them from ``engine.store._base``
and ``engine.store._signals``.
"""

from engine._redaction import redact_dsn
from engine.store._base import StoreCapabilities, TaskStore
from engine.store._signals import WatchSignal
from engine.store.postgres import PostgresStore
from engine.store.sqlite import SQLiteStore

__all__ = [
    "PostgresStore",
    "SQLiteStore",
    "StoreCapabilities",
    "TaskStore",
    "WatchSignal",
    "redact_dsn",
]
