"""Fixtures for the console tests: the demo database, and the console app on it."""

from __future__ import annotations

from pathlib import Path

import pytest
from console_states import build_demo_db


@pytest.fixture
def demo_db(tmp_path: Path) -> Path:
    """A fresh copy of the deterministic demo database."""
    return build_demo_db(tmp_path / "demo.db")


@pytest.fixture(autouse=True)
def _no_personal_config(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Named targets come from the test's own files, never from the user's config;
    history files go to a folder of the test's own, never the user's state directory."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("xdg")))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("xdg-state")))
