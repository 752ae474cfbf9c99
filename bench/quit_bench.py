"""Quit time of the real ``cairnq-tui launch`` in tmux: ``q`` pressed until the process is gone.

Each run starts the console in a private tmux server (160x45 pane) on a fresh SQLite
database, waits until the status bar says ``live``, sends ``q`` and times until the
shell line after the command has run (the command wrote its end time to a file).
This is what an operator sees: the app's exit, the hosted workers' shutdown, the
stores closing and the interpreter's own exit, all included.

Modes: ``plain`` (no hosted worker) and ``hosted`` (``--worker`` with a no-op
worker polling every 5 s, so a shutdown that waited for a poll would show).
Target (issue 13): at most 1 s in every mode when no hosted call is in flight.

Usage: ``python bench/quit_bench.py [--runs 5] [--mode plain|hosted|all]``
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from pathlib import Path

SCRIPT = Path(sys.executable).with_name("cairnq-tui")
ROOT = Path(__file__).resolve().parent.parent

IDLE_WORKER = """
from engine import Worker

def make(store):
    w = Worker(store, ["default"], concurrency=4, poll_interval_ms=5000)

    @w.task("noop")
    async def noop(ctx):
        return None

    return w
"""

#: Waits longer than this mean the console never came up or never quit.
STARTUP_TIMEOUT_S = 60.0
QUIT_TIMEOUT_S = 30.0


def _tmux(socket: str, *args: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        ["tmux", "-L", socket, *args], capture_output=True, text=True, check=True, env=env
    )
    return done.stdout


def one_run(folder: Path, mode: str, script: Path = SCRIPT) -> float:
    """Seconds from ``q`` sent to the shell running the line after the console."""
    db = folder / f"quit-{uuid.uuid4().hex[:6]}.db"
    end_file = folder / "end"
    end_file.unlink(missing_ok=True)
    command = [str(script), "launch", str(db)]
    if mode == "hosted":
        command += ["--worker", "quit_idle:make"]
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env["PYTHONPATH"] = os.pathsep.join([str(folder), str(ROOT)])
    line = " ".join(f"'{part}'" for part in command)
    # The end time is taken by ``date`` (a fresh Python would add its own startup),
    # which the shell runs the moment the console's process has exited.
    shell = f"{line}; date +%s.%N > {end_file}; sleep 30"
    socket = f"cq-quit-{uuid.uuid4().hex[:8]}"
    _tmux(socket, "new-session", "-d", "-x", "160", "-y", "45", "-s", "q", shell, env=env)
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while "live" not in _tmux(socket, "capture-pane", "-p", "-t", "q"):
            if time.monotonic() > deadline:
                screen = _tmux(socket, "capture-pane", "-p", "-t", "q")
                raise SystemExit(f"the console did not come up:\n{screen}")
            time.sleep(0.05)
        time.sleep(1.0)  # a few refreshes: the heap frozen, the workers polling
        sent = time.time()
        _tmux(socket, "send-keys", "-t", "q", "q")
        deadline = time.monotonic() + QUIT_TIMEOUT_S
        while not end_file.exists() or not end_file.read_text().strip():
            if time.monotonic() > deadline:
                raise SystemExit("the console did not quit")
            time.sleep(0.005)
        return float(end_file.read_text()) - sent
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--mode", choices=["plain", "hosted", "all"], default="all")
    parser.add_argument(
        "--script",
        type=Path,
        default=SCRIPT,
        help="the cairnq-tui executable to time (default: the one beside this Python)",
    )
    args = parser.parse_args()
    if shutil.which("tmux") is None:
        print("tmux is not installed", file=sys.stderr)
        return 2
    modes = ["plain", "hosted"] if args.mode == "all" else [args.mode]
    folder = Path(tempfile.mkdtemp(prefix="cairnq-quit-bench-"))
    (folder / "quit_idle.py").write_text(textwrap.dedent(IDLE_WORKER))
    try:
        load = os.getloadavg()
        print(
            f"quit time, q to process gone (tmux), {args.runs} runs per mode; "
            f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
        )
        print("{:<8} {:>8} {:>8} {:>8}".format("mode", "median s", "min s", "max s"))
        for mode in modes:
            times = [one_run(folder, mode, args.script) for _ in range(args.runs)]
            print(f"{mode:<8} {statistics.median(times):8.2f} {min(times):8.2f} {max(times):8.2f}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
