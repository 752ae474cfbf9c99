"""End to end: the real ``cairnq-tui demo`` in tmux — tasks flow, every hosted view
fills, the worker pauses and resumes, and quitting exits 0 and removes the
temporary database."""

from __future__ import annotations

import os
import time
from pathlib import Path

from test_e2e_tmux import SCRIPT, Tmux, pytestmark  # noqa: F401  (tmux presence skip)


def test_demo_in_tmux(tmp_path: Path) -> None:
    exit_file = tmp_path / "exit.txt"
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {
        **os.environ,
        "TERM": "xterm-256color",
        "EXIT_FILE": str(exit_file),
        "TMPDIR": str(temp),  # where the demo's throwaway database goes
    }
    tmux = Tmux([str(SCRIPT), "demo", "--rate", "60", "--seed", "4"], env)
    try:
        tmux.wait_for("embed", "demo.db", "sqlite", timeout=20)
        assert [p.name[:12] for p in temp.iterdir()] == ["cairnq-demo-"]

        tmux.keys("6")
        tmux.wait_for("cairnq_tui.demo:make_worker  running")
        tmux.wait_for("index.update", "Why less", "thumbnail")

        tmux.keys("7")
        tmux.wait_for("gpu (lock)")

        tmux.keys("8")
        tmux.wait_for("Lease left")

        tmux.keys("9")
        tmux.wait_for("ConnectionError: upstream", timeout=20)

        tmux.keys("5")
        tmux.wait_for("Gives up in")

        tmux.keys("z")
        tmux.wait_for("make_worker  paused")
        tmux.keys("z")
        tmux.wait_for("make_worker  running")

        tmux.keys("q")
        deadline = time.monotonic() + 15
        while not exit_file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert exit_file.read_text().strip() == "EXIT=0"
        assert list(temp.iterdir()) == []  # the throwaway database is gone
    finally:
        tmux.kill()


def test_demo_on_an_empty_postgres_database(tmp_path: Path, pg_database: str) -> None:
    """``demo --db DSN`` on an empty database creates the tables (it hosts a worker, as
    ``launch --worker`` does) and says so; the DSN's password never reaches the screen.
    Before, it refused with a message telling to pass ``--create``, which demo has not."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    exit_file = tmp_path / "exit.txt"
    env = {**os.environ, "TERM": "xterm-256color", "EXIT_FILE": str(exit_file)}
    dsn = make_conninfo(**{**conninfo_to_dict(pg_database), "password": "s3cret-demo"})
    tmux = Tmux([str(SCRIPT), "demo", "--db", dsn, "--rate", "20", "--seed", "4"], env)
    try:
        screen = tmux.wait_for("Created the cairnq tables", "postgres", timeout=30)
        assert "s3cret-demo" not in screen
        tmux.keys("6")
        tmux.wait_for("cairnq_tui.demo:make_worker  running", timeout=20)
        tmux.keys("q")
        deadline = time.monotonic() + 15
        while not exit_file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert exit_file.read_text().strip() == "EXIT=0"
    finally:
        tmux.kill()
