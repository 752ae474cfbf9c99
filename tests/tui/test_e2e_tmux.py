"""End to end: the real ``cairnq-tui launch`` in tmux, against a database that another
process is working right now; keys are typed and the screen is read back."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

SCRIPT = Path(sys.executable).with_name("cairnq-tui")
WORKER = r"""
import asyncio, sys
from engine import SQLiteStore

async def main(path):
    store = SQLiteStore(path)
    await store.connect()
    n = 0
    while True:
        n += 1
        await store.submit(name="e2e.job", queue="e2e", payload={"n": n}, key=f"e2e-{n:04d}")
        if n % 3:
            for task in await store.claim(queues=["e2e"], worker_id="worker_e2e", limit=1):
                await store.progress(task_id=task.id, worker_id="worker_e2e", progress=0.5)
                await store.complete(task_id=task.id, worker_id="worker_e2e", result={"n": n})
        await asyncio.sleep(0.05)

asyncio.run(main(sys.argv[1]))
"""

#: Runs the console script's own entry function, and (from the last ``atexit`` handler,
#: once everything else has run) writes down what the interpreter's final garbage
#: collections would have to scan.
QUIT_PROBE = """
import atexit, gc, json, sys, threading

def probe():
    with open(sys.argv[1], "w") as out:
        json.dump({
            "frozen": gc.get_freeze_count(),
            "unfrozen": len(gc.get_objects()),
            "threads": [t.name for t in threading.enumerate()],
        }, out)

atexit.register(probe)  # registered first, so it runs last
from cairnq_tui.cli import run
sys.exit(run(sys.argv[2:]))
"""
IDLE_WORKER = """
from engine import Worker

def make(store):
    w = Worker(store, ["default"], poll_interval_ms=3_600_000)

    @w.task("noop")
    async def noop(ctx):
        return None

    return w
"""

pytestmark = [
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
    # Under xdist the tmux tests run one after another on one worker: each drives a
    # whole console process and they are the ones most sensitive to a loaded machine.
    pytest.mark.xdist_group("tmux"),
]


class Tmux:
    """One private tmux server (its own socket) running one command."""

    def __init__(self, command: list[str], env: dict[str, str]) -> None:
        self.socket = f"cq-e2e-{uuid.uuid4().hex[:8]}"
        # pytest-xdist workers carry COLUMNS=80 and LINES=24, which Textual would
        # obey over the pane's real size: the console must see the 160x45 pane.
        env = {k: v for k, v in env.items() if k not in ("COLUMNS", "LINES")}
        line = " ".join(f"'{part}'" for part in command)
        subprocess.run(
            [
                "tmux",
                "-L",
                self.socket,
                "new-session",
                "-d",
                "-x",
                "160",
                "-y",
                "45",
                "-s",
                "console",
                f"{line}; echo EXIT=$? > {env['EXIT_FILE']}; sleep 5",
            ],
            check=True,
            env=env,
        )

    def screen(self) -> str:
        return subprocess.run(
            ["tmux", "-L", self.socket, "capture-pane", "-p", "-t", "console"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    def keys(self, *keys: str) -> None:
        subprocess.run(["tmux", "-L", self.socket, "send-keys", "-t", "console", *keys], check=True)

    def wait_for(self, *texts: str, timeout: float = 10.0) -> str:
        """The first screen showing every one of ``texts`` (parts of the screen are
        drawn at different moments, so each is waited for, not assumed)."""
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if all(text in screen for text in texts):
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"{texts!r} never all appeared; screen was:\n{screen}")
            time.sleep(0.1)

    def wait_gone(self, text: str, timeout: float = 10.0) -> str:
        """The first screen no longer showing ``text``."""
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if text not in screen:
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} never went away; screen was:\n{screen}")
            time.sleep(0.1)

    def kill(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], check=False, capture_output=True)


@pytest.fixture
def worked_db(tmp_path: Path) -> Iterator[Path]:
    """A database with a worker process submitting and completing tasks meanwhile."""
    path = tmp_path / "live.db"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    worker = subprocess.Popen([sys.executable, "-c", WORKER, str(path)], env=env)
    deadline = time.monotonic() + 10
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    yield path
    worker.terminate()
    worker.wait(timeout=5)


def test_launch_in_tmux_against_a_live_database(worked_db: Path, tmp_path: Path) -> None:
    exit_file = tmp_path / "exit.txt"
    env = {**os.environ, "TERM": "xterm-256color", "EXIT_FILE": str(exit_file)}
    tmux = Tmux([str(SCRIPT), "launch", str(worked_db), "--refresh", "0.3"], env)
    try:
        tmux.wait_for("e2e.job", "live.db", "sqlite", "protocol v1")

        tmux.keys("2")
        tmux.wait_for("1 queue(s)", "Done/min")

        tmux.keys("3")
        tmux.wait_for("running task(s) on")

        tmux.keys("4")
        tmux.wait_for("e2e-0001")
        tmux.keys("Enter")  # the detail of the task under the first key
        tmux.wait_for("Why:", "e2e.job")
        # A key sent right behind a lone Escape reads as alt+key: wait until the
        # Escape has done its work (the screen it closed is gone) before the next.
        tmux.keys("Escape")
        tmux.wait_gone("Why:")
        tmux.keys("1")
        tmux.wait_for("shown of")
        tmux.keys("?")
        tmux.wait_for("Everywhere")
        tmux.keys("Escape")
        tmux.wait_gone("Everywhere")
        tmux.keys("q")
        deadline = time.monotonic() + 10
        while not exit_file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert exit_file.read_text().strip() == "EXIT=0"
    finally:
        tmux.kill()


def test_quit_closes_every_store_and_leaves_the_interpreter_nothing_to_collect(
    tmp_path: Path,
) -> None:
    """Quit's mechanism, end to end (bench/quit_bench.py times it).

    The console with a hosted worker (polling once an hour) quits on ``q``: the
    process exits 0; the database's WAL file is gone, which SQLite does only when
    the last connection closes, so the console's store and the hosted worker's
    were both closed; no thread is left; and the heap is frozen when the
    interpreter finalizes, so its garbage collections scan next to nothing (they
    scanned some 90,000 objects, 0.8 s of a 1.1 s quit, before).
    """
    from importlib.metadata import entry_points

    (script,) = entry_points(group="console_scripts", name="cairnq-tui")
    assert script.value == "cairnq_tui.cli:run"  # the console script is the probed entry
    (tmp_path / "probe.py").write_text(QUIT_PROBE)
    (tmp_path / "quit_idle.py").write_text(IDLE_WORKER)
    db, report, exit_file = tmp_path / "quit.db", tmp_path / "probe.json", tmp_path / "exit.txt"
    env = {
        **os.environ,
        "TERM": "xterm-256color",
        "EXIT_FILE": str(exit_file),
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(Path(__file__).parents[2])]),
    }
    command = [sys.executable, str(tmp_path / "probe.py"), str(report)]
    tmux = Tmux([*command, "launch", str(db), "--worker", "quit_idle:make"], env)
    try:
        tmux.wait_for("live", "protocol v1", timeout=30)
        assert Path(f"{db}-wal").exists()  # open connections keep it
        tmux.keys("q")
        deadline = time.monotonic() + 60  # generous: a wait for the hour-long poll fails
        while not exit_file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert exit_file.read_text().strip() == "EXIT=0"
    finally:
        tmux.kill()
    assert not Path(f"{db}-wal").exists() and not Path(f"{db}-shm").exists()
    found = json.loads(report.read_text())
    assert found["threads"] == ["MainThread"]
    assert found["frozen"] > 10_000  # the console's heap, out of every collection's reach
    assert found["unfrozen"] < found["frozen"] / 20, found


def test_a_hosted_worker_creates_the_tables_of_an_empty_postgres_database(
    pg_database: str, tmp_path: Path
) -> None:
    """``launch EMPTY_PG --worker …`` creates the cairnq tables (as SQLite creates its
    file), says so, and the worker runs there; without it the target is refused."""
    import psycopg

    exit_file = tmp_path / "exit.txt"
    env = {**os.environ, "TERM": "xterm-256color", "EXIT_FILE": str(exit_file)}
    worker = ["--worker", "cairnq_tui.demo:make_worker", "--refresh", "0.3"]
    tmux = Tmux([str(SCRIPT), "launch", pg_database, *worker], env)
    try:
        tmux.wait_for("Created the cairnq tables in", timeout=60)
        tmux.keys("q")
        deadline = time.monotonic() + 60
        while not exit_file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert exit_file.read_text().strip() == "EXIT=0"
    finally:
        tmux.kill()
    with psycopg.connect(pg_database) as conn:
        row = conn.execute("select value from cairnq_meta where key = 'protocol_version'")
        assert row.fetchone() is not None


HUNG_WORKER = """
import time
from engine import Worker

def make(store):
    w = Worker(store, ["default"], poll_interval_ms=20, lease_ms=60_000)

    @w.task("stuck")
    def stuck(ctx):
        time.sleep(3600)  # never returns while the console runs

    return w
"""


def test_quit_with_a_hung_hosted_call_says_so_and_does_not_wait_for_it(tmp_path: Path) -> None:
    """Quit's path with a ``def`` call in flight that never returns (issues 20.5, 24.12).

    ``q`` says on screen what the grace means, the process exits without waiting for
    the hung thread (it used to wait out the hour), the line printed on exit names
    the task, and the task is still ``running`` in the database: its lease decides.
    """
    import asyncio

    from engine import SQLiteStore

    (tmp_path / "quit_hung.py").write_text(HUNG_WORKER)
    db, exit_file = tmp_path / "hung.db", tmp_path / "exit.txt"

    async def submit() -> str:
        store = SQLiteStore(db)
        await store.connect()
        try:
            return (await store.submit(name="stuck", queue="default")).id
        finally:
            await store.close()

    async def status(task_id: str) -> str | None:
        store = SQLiteStore(db)
        await store.connect()
        try:
            task = await store.get(task_id)
            return task.status if task else None
        finally:
            await store.close()

    task_id = asyncio.run(submit())
    env = {
        **os.environ,
        "TERM": "xterm-256color",
        "EXIT_FILE": str(exit_file),
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(Path(__file__).parents[2])]),
    }
    tmux = Tmux([str(SCRIPT), "launch", str(db), "--worker", "quit_hung:make"], env)
    try:
        tmux.wait_for("live", "protocol v1", timeout=30)
        deadline = time.monotonic() + 30
        while asyncio.run(status(task_id)) != "running":
            assert time.monotonic() < deadline, "the hosted worker never claimed the task"
            time.sleep(0.1)
        tmux.keys("q")
        tmux.wait_for("Quitting", "Waiting up to 3 s", timeout=30)
        deadline = time.monotonic() + 60  # generous: waiting out the hung call fails it
        while not exit_file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert exit_file.exists(), f"still running; screen was:\n{tmux.screen()}"
        assert exit_file.read_text().strip() == "EXIT=0"
        screen = " ".join(tmux.screen().split())
        assert "cairnq-tui: quit with 1 hosted call still running" in screen, screen
        assert task_id[:20] in screen  # (the pane may wrap the id)
    finally:
        tmux.kill()
    assert asyncio.run(status(task_id)) == "running"  # until its lease ends
