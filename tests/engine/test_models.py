"""The small value types of engine._models, as callers construct them."""

from __future__ import annotations

import dataclasses

import pytest

from engine import TaskDef


def test_task_def_through_a_subscripted_alias() -> None:
    # The form cairnq's docs use; it raised TypeError on Python 3.11 and 3.12.
    greet = TaskDef[dict, dict]("greet")
    assert greet.name == "greet"
    assert greet == TaskDef("greet") and hash(greet) == hash(TaskDef("greet"))
    assert isinstance(greet, TaskDef)


def test_task_def_stays_frozen() -> None:
    greet = TaskDef[dict, str]("greet")
    with pytest.raises(dataclasses.FrozenInstanceError):
        greet.name = "other"  # type: ignore[misc]
