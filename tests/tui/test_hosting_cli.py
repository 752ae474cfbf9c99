"""``cairnq-tui launch --worker`` and ``cairnq-tui demo`` refuse bad input with one
line on stderr and exit status 2, before any console opens."""

from __future__ import annotations

import asyncio
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cairnq_tui.cli import main
from engine import SQLiteStore


@pytest.fixture
def in_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    for name in ("broken_jobs",):
        sys.modules.pop(name, None)


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(argv)
    return code, capsys.readouterr().err


def test_bad_worker_spec(in_folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run(["launch", str(in_folder / "t.db"), "--worker", "nocolon"], capsys)
    assert code == 2 and "expected MODULE:ATTR" in err and "Traceback" not in err


def test_worker_with_read_only(in_folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    async def create() -> None:
        store = SQLiteStore(in_folder / "t.db")
        await store.connect()
        await store.close()

    asyncio.run(create())
    code, err = run(["launch", "t.db", "--read-only", "--worker", "m:w"], capsys)
    assert code == 2 and "--worker cannot be used with --read-only" in err


def test_broken_worker_module_names_file_and_line(
    in_folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (in_folder / "broken_jobs.py").write_text("import engine\n\nworker = engine.Worker(\n")
    code, err = run(["launch", "t.db", "--worker", "broken_jobs:worker"], capsys)
    assert code == 2
    assert err.startswith("cairnq-tui: cannot load broken_jobs:worker: SyntaxError")
    assert "broken_jobs.py, line 3" in err and "Traceback" not in err


def test_demo_refuses_a_foreign_database(
    in_folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with sqlite3.connect(in_folder / "other.db") as conn:
        conn.execute("create table notes (body text)")
    code, err = run(["demo", "--db", "other.db"], capsys)
    assert code == 2 and "not a cairnq one" in err
    with pytest.raises(SystemExit):
        main(["demo", "--rate", "0"])
    assert "between 0.1 and 5000" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("spec", "setup"),
    [
        ("nosuchmod_xyz:worker", None),
        ("broken_jobs:worker", "worker = 1 / 0\n"),
        ("broken_jobs:nothing", "x = 1\n"),
        ("broken_jobs:make", "def make(store):\n    raise RuntimeError('no')\n"),
    ],
)
def test_a_worker_that_cannot_load_leaves_no_database(
    in_folder: Path, capsys: pytest.CaptureFixture[str], spec: str, setup: str | None
) -> None:
    if setup is not None:
        (in_folder / "broken_jobs.py").write_text(setup)
    code, err = run(["launch", "x.db", "--worker", spec], capsys)
    assert code == 2 and err.startswith("cairnq-tui: ") and "Traceback" not in err
    assert sorted(p.name for p in in_folder.iterdir() if p.name.startswith("x.db")) == []
