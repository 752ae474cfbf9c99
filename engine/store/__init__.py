"""Stores: one cairnq database each, every protocol operation, per dialect."""

from engine._redaction import redact_dsn
from engine.store._base import Draw, NewTask, Plan, StoreCapabilities, TaskStore
from engine.store._signals import Signals, WatchSignal
from engine.store.postgres import PostgresStore
from engine.store.sqlite import SQLiteStore

__all__ = [
    "Draw",
    "NewTask",
    "Plan",
    "PostgresStore",
    "SQLiteStore",
    "Signals",
    "StoreCapabilities",
    "TaskStore",
    "WatchSignal",
    "redact_dsn",
]
