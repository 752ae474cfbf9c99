"""Keypress-to-repaint in the console while a hosted worker drains ~1,000 no-op tasks/s.

Runs the real console headless (``App.run_test``) on a fresh SQLite database. A
producer process submits no-op tasks at ``--rate`` per second; a worker drains
them, hosted one of three ways:

- ``thread``: ``WorkerHost`` — the worker on its own loop in its own thread (what
  ``--worker`` does);
- ``same-loop``: the worker as a task on the console's own event loop (the design
  the thread avoids), for comparison;
- ``none``: no worker (the producer process still runs), the baseline;
- ``gil``: no worker, but a thread spinning pure Python beside the console: what
  any CPU-busy thread in the process costs the console through the GIL.

For each mode it presses keys that switch views and times each press until the
first frame the console composes (``App._display``) that shows the new view,
then prints p50/p95/max and the drain rate achieved. Target (issue 13), every
mode: p50 at most 30 ms and p95 at most 80 ms with the producer at 1,000 tasks/s.

``--gc`` adds, per mode, the garbage collections (per generation: how many,
their total and longest pause) during the presses and over the whole run, and
the console thread's CPU time per press (``time.thread_time``): CPU time moves
less than wall time when other processes load the machine, so it is the figure
to compare between two runs on a busy machine.

A press that gets no frame within ``FRAME_TIMEOUT_S`` (a console that died
draws none) fails the run instead of waiting forever. ``--mode all`` used to
hang at exit: the same-loop worker's store was never closed, and its
connection thread kept the process alive; the bench now closes it. One mode
per invocation still gives the cleanest figures (no state carried over).

Usage: ``python bench/hosting_bench.py [--rate 1000] [--presses 60] [--mode thread] [--gc]``
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import random
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cairnq_tui.app import ConsoleApp, Settings
from cairnq_tui.hosting import WorkerHost
from cairnq_tui.target import Target
from engine import SQLiteStore, Worker

NOOP_MODULE = """
from engine import Worker

def make(store):
    w = Worker(store, ["default"], concurrency=16, poll_interval_ms=50)

    @w.task("noop")
    async def noop(ctx):
        return None

    return w
"""


#: A press without a frame for this long means the console is stuck or dead.
FRAME_TIMEOUT_S = 10.0

PRODUCER = """
import asyncio, sys, time
from engine import CairnQ, SQLiteStore

async def main(path, rate):
    async with CairnQ(SQLiteStore(path)) as client:
        started, submitted = time.monotonic(), 0
        while True:
            due = int((time.monotonic() - started) * rate) - submitted
            for _ in range(min(due, 200)):
                await client.submit("noop")
                submitted += 1
            print(submitted, flush=True)
            await asyncio.sleep(0.01)

asyncio.run(main(sys.argv[1], float(sys.argv[2])))
"""


class Producer:
    """Submits no-op tasks at ``rate`` per second from another process, as clients would."""

    def __init__(self, path: Path, rate: float) -> None:
        self.path, self.rate = path, rate
        self.submitted = 0
        self._process: subprocess.Popen[str] | None = None

    def start(self) -> None:
        root = Path(__file__).resolve().parent.parent
        self._process = subprocess.Popen(
            [sys.executable, "-c", PRODUCER, str(self.path), str(self.rate)],
            cwd=root,
            stdout=subprocess.PIPE,
            text=True,
        )

    def stop(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        self._process.terminate()
        lines = self._process.stdout.read().split()
        self._process.wait()
        self.submitted = int(lines[-1]) if lines else 0


def worker_module(folder: Path) -> str:
    (folder / "bench_noop.py").write_text(textwrap.dedent(NOOP_MODULE))
    sys.path.insert(0, str(folder))
    return "bench_noop:make"


class GcWatch:
    """Garbage collections (start, pause in ms, generation) and the presses' windows."""

    def __init__(self) -> None:
        self.collections: list[tuple[float, float, int]] = []
        self.windows: list[tuple[float, float]] = []
        self.cpu_ms: list[float] = []
        self._started = 0.0

    def __enter__(self) -> GcWatch:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._callback)

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        now = time.perf_counter()
        if phase == "start":
            self._started = now
        else:
            self.collections.append(
                (self._started, (now - self._started) * 1000, info["generation"])
            )

    def summary(self) -> str:
        def per_generation(found: list[tuple[float, float, int]]) -> str:
            parts = []
            for generation in range(3):
                pauses = [ms for _, ms, g in found if g == generation]
                top = max(pauses, default=0.0)
                parts.append(f"gen{generation} {len(pauses)} ({sum(pauses):.0f} ms, max {top:.0f})")
            return ", ".join(parts)

        during = [c for c in self.collections if any(s <= c[0] <= e for s, e in self.windows)]
        cpu = sorted(self.cpu_ms)
        return (
            f"  gc during presses: {per_generation(during)}\n"
            f"  gc whole run:      {per_generation(self.collections)}\n"
            f"  console CPU per press: p50 {statistics.median(cpu):.1f} ms, "
            f"p95 {cpu[int(len(cpu) * 0.95) - 1]:.1f} ms"
        )


async def measure(app: ConsoleApp, presses: int, watch: GcWatch | None = None) -> list[float]:
    """Switch views by key and time each press to the first composed frame showing it, in ms."""
    pending: dict[str, Any] = {"view": None, "frame": None}
    display = app._display  # what every composed frame goes through, headless too

    def timed_display(screen: Any, renderable: Any) -> None:
        display(screen, renderable)
        view = pending["view"]
        if renderable is None or view is None or pending["frame"] is not None:
            return
        if getattr(screen, "shown", None) == view:  # this frame is the first to show it
            pending["frame"] = time.perf_counter()

    app._display = timed_display  # type: ignore[method-assign]
    rng = random.Random(1)
    samples = []
    views = {"1": "tasks", "2": "queues", "3": "leases", "5": "waits", "6": "quotas", "8": "calls"}
    async with app.run_test(size=(150, 40)) as pilot:
        for _ in range(300):  # until connected and the first refresh is drawn
            await pilot.pause(0.02)
            if app.connected and app.ticks and not app._in_flight:
                break
        await pilot.pause(1.0)
        keys = ["6", "1", "8", "2", "5", "1", "3", "2"]  # never the same view twice
        for i in range(presses):
            key = keys[i % len(keys)]
            pending["view"], pending["frame"] = views[key], None
            started, cpu_started = time.perf_counter(), time.thread_time()
            press = asyncio.ensure_future(pilot.press(key))
            while pending["frame"] is None:
                # A console that died (an exception in a handler) draws no more
                # frames: fail instead of waiting for one forever.
                if app._exception is not None or time.perf_counter() - started > FRAME_TIMEOUT_S:
                    raise RuntimeError(
                        f"no frame showing {views[key]!r} within {FRAME_TIMEOUT_S:g}s "
                        f"(console error: {app._exception!r})"
                    )
                await asyncio.sleep(0.0005)
            samples.append((pending["frame"] - started) * 1000)
            if watch is not None:
                watch.cpu_ms.append((time.thread_time() - cpu_started) * 1000)
                watch.windows.append((started, pending["frame"]))
            await press
            await asyncio.sleep(rng.uniform(0.05, 0.15))
    return samples


def _spin(stop: threading.Event) -> None:
    while not stop.is_set():
        sum(range(1000))


async def run_mode(
    mode: str, rate: float, presses: int, watch: GcWatch | None = None
) -> dict[str, float]:
    folder = Path(tempfile.mkdtemp(prefix="cairnq-hosting-bench-"))
    path = folder / "tasks.db"
    store = SQLiteStore(path)
    await store.connect()
    await store.close()
    store = SQLiteStore(path)
    host = None
    if mode == "thread":
        spec = worker_module(folder)
        host = WorkerHost([spec], make_store=lambda: SQLiteStore(path), target_text=str(path))
        await asyncio.to_thread(host.start)
    target = Target(str(path), "sqlite", "tasks.db")
    app = ConsoleApp(store, Settings(target=target, refresh_s=1.0), host=host)
    producer = Producer(path, rate)
    producer.start()
    same_loop: Worker | None = None
    spinning = threading.Event()
    if mode == "gil":
        threading.Thread(target=_spin, args=(spinning,), daemon=True).start()
    claimed_at_start = time.monotonic()
    try:
        if mode == "same-loop":
            spec = worker_module(folder)
            module = __import__(spec.split(":")[0])
            worker_store = SQLiteStore(path)
            same_loop = module.make(worker_store)
            try:
                async with same_loop.background():
                    samples = await measure(app, presses, watch)
                    claimed = same_loop.snapshot().tasks_claimed
            finally:
                # The worker closes only a store it opened itself: left open, the
                # store's connection thread kept the process from exiting.
                await worker_store.close()
        else:
            samples = await measure(app, presses, watch)
            claimed = 0
            if host is not None:
                claimed = (await host.statuses())[0].snapshot.tasks_claimed  # type: ignore[union-attr]
        elapsed = time.monotonic() - claimed_at_start
    finally:
        spinning.set()
        producer.stop()
        if host is not None:
            await host.close(1.0)
    samples.sort()
    return {
        "p50": statistics.median(samples),
        "p95": samples[int(len(samples) * 0.95) - 1],
        "max": samples[-1],
        "drain_per_s": claimed / elapsed,
        "submit_per_s": producer.submitted / elapsed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=1000.0, help="tasks submitted per second")
    parser.add_argument("--presses", type=int, default=60)
    modes_help = ["thread", "same-loop", "none", "gil", "all"]
    parser.add_argument("--mode", choices=modes_help, default="all")
    parser.add_argument("--gc", action="store_true", help="also report collections and CPU time")
    args = parser.parse_args()
    modes = ["none", "gil", "thread", "same-loop"] if args.mode == "all" else [args.mode]
    print(f"keypress to repaint, {args.presses} presses, producer at {args.rate:g} tasks/s")
    print("durability: engine SQLite synchronous=FULL (the default) for every store")
    header = ("mode", "p50 ms", "p95 ms", "max ms", "drained/s", "submitted/s")
    print("{:<10} {:>8} {:>8} {:>8} {:>10} {:>12}".format(*header))
    for mode in modes:
        watch = GcWatch() if args.gc else None
        if watch is not None:
            with watch:
                r = asyncio.run(run_mode(mode, args.rate, args.presses, watch))
        else:
            r = asyncio.run(run_mode(mode, args.rate, args.presses))
        print(
            f"{mode:<10} {r['p50']:8.1f} {r['p95']:8.1f} {r['max']:8.1f} "
            f"{r['drain_per_s']:10.0f} {r['submit_per_s']:12.0f}"
        )
        if watch is not None:
            print(watch.summary())


if __name__ == "__main__":
    main()
