"""Stores: one cairnq database each, every protocol operation, per dialect."""

from engine.store._base import Draw, NewTask, Plan, TaskStore
from engine.store._signals import Signals, WatchSignal

__all__ = ["Draw", "NewTask", "Plan", "Signals", "TaskStore", "WatchSignal"]
