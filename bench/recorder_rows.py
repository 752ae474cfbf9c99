"""The recorder rows of the console benchmark (issue 22's figures).

Both drive the recorder's real code path (``cairnq_tui.history.Recorder`` over the
engine's ``Inspector`` and a real ``HistoryFile``), no mocks:

1. Refresh-tick cost with and without the recorder, on the triage database of
   100,000 tasks (bench/triage_rows.py: 20 names, 10,000 failures). A tick is the
   Tasks view's reads (``tasks_page`` of the default filter, 50 rows, then
   ``keys_for_tasks`` of its ids) and, when recorded, ``note_rows`` of the page.
   The console refreshes every ``Settings.refresh_s`` and samples every
   ``SAMPLE_EVERY_S``, each sample started right after a tick has drawn, so it
   is done long before the next tick a refresh period later: the "after" arm
   starts one after one tick in that many and waits for it untimed before the
   next tick. The "together" arm starts the sample with the tick (what a timer
   of its own could do, the worst case). Three arms interleaved in slices.
   The target (<= 5%) is the mean tick of the "after" arm over the mean tick
   alone; the CPU the whole process spent per tick (the sample's threads
   included, untimed waits too) is printed beside each, and the sample's own
   cost, awaited alone. The counts of finished tasks, read once in
   ``FINISHED_EVERY_MS`` (not within the measured ticks), are timed apart and
   their share per tick added to the CPU figure.
2. History file size after a simulated week: the recorder sampled every
   ``SAMPLE_EVERY_S`` of a simulated clock for 7 days, on a SQLite database into
   which 100,000 failures (20 names, 4 queues, 50 messages) arrive at random times
   over the week (inserted as the clock passes them; failures older than an hour
   are deleted from the cairnq database to keep it small, which changes nothing the
   recorder reads: it reads from where its last sample stopped). The file's age
   and size bounds are the defaults, pruned every ``PRUNE_EVERY_MS`` as in
   production. The history file is written under /dev/shm when there is one (the
   size is the figure; fsync time is not). Target <= 50 MB (here MB = 2**20 bytes,
   the unit of the file's own bound, ``DEFAULT_MAX_BYTES``).

Usage: imported by console_bench.py (``--recorder-only``).
"""

from __future__ import annotations

import asyncio
import os
import random
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

from triage_rows import MESSAGES, NAMES, QUEUES, TYPES, build_sqlite

WEEK_MS = 7 * 24 * 3_600_000


def _p50(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


async def measure_tick(db: Path, *, slices: int = 20, per_slice: int = 20) -> dict[str, float]:
    """Tick alone vs. with the recorder sampling after it or beside it; ms."""
    from cairnq_tui.history import SAMPLE_EVERY_S, HistoryFile, Recorder
    from cairnq_tui.settings import Settings
    from cairnq_tui.widgets.tasks_view import PAGE_SIZE
    from engine import SQLiteStore
    from engine.inspection import Inspector, TaskFilter

    store = SQLiteStore(str(db))
    await store.connect()
    folder = Path(tempfile.mkdtemp(prefix="cairnq-recorder-bench-"))
    history = HistoryFile(folder / "history.sqlite3", target="bench")
    try:
        span = await Inspector(store)._read("inspect_failures_span", {"cap": 1})
        built_at = int(span[0]["newest_ms"]) + 60_000
        inspector = Inspector(store, clock=lambda: built_at)
        recorder = Recorder(inspector, history, lambda: built_at)
        flt = TaskFilter(sort="created", descending=True)

        refresh_s = Settings.__dataclass_fields__["refresh_s"].default
        per_sample = max(1, round(SAMPLE_EVERY_S / refresh_s))

        async def tick(record: bool) -> None:
            page = await inspector.tasks_page(flt, limit=PAGE_SIZE)
            await inspector.keys_for_tasks([r.id for r in page.rows])
            if record:
                recorder.note_rows(page.rows)

        await tick(True)
        await recorder.sample()  # warm: the first sample reads the last hour's failures
        arms = ("alone", "after", "together")
        wall: dict[str, list[float]] = {arm: [] for arm in arms}
        cpu: dict[str, float] = dict.fromkeys(arms, 0.0)
        with_sample: list[float] = []
        for _ in range(slices):
            for arm in arms:
                c0 = time.process_time()
                for i in range(per_slice):
                    sampling = arm != "alone" and i % per_sample == 0
                    task = None
                    if sampling and arm == "together":
                        task = asyncio.ensure_future(recorder.sample())
                    t0 = time.perf_counter()
                    await tick(arm != "alone")
                    wall[arm].append((time.perf_counter() - t0) * 1000)
                    if task is not None:
                        with_sample.append(wall[arm][-1])
                        await task  # (done long before the next tick, a second later)
                    elif sampling:
                        await recorder.sample()  # after the tick, before the next one
                cpu[arm] += (time.process_time() - c0) * 1000
        finished_wall, finished_cpu = [], []
        for _ in range(10):  # the counts of finished tasks, read every FINISHED_EVERY_MS
            t0, c0 = time.perf_counter(), time.process_time()
            await recorder.inspector.name_counts()
            finished_wall.append((time.perf_counter() - t0) * 1000)
            finished_cpu.append((time.process_time() - c0) * 1000)
        sample_wall, sample_cpu = [], []
        for _ in range(30):
            t0, c0 = time.perf_counter(), time.process_time()
            await recorder.sample()
            sample_wall.append((time.perf_counter() - t0) * 1000)
            sample_cpu.append((time.process_time() - c0) * 1000)
        ticks = slices * per_slice
        return {
            "alone_ms": sum(wall["alone"]) / ticks,
            "after_ms": sum(wall["after"]) / ticks,
            "together_ms": sum(wall["together"]) / ticks,
            "alone_p50_ms": _p50(wall["alone"]),
            "after_p50_ms": _p50(wall["after"]),
            "together_p50_ms": _p50(with_sample),
            "alone_cpu_ms": cpu["alone"] / ticks,
            "after_cpu_ms": cpu["after"] / ticks,
            "together_cpu_ms": cpu["together"] / ticks,
            "finished_ms": _p50(finished_wall),
            "finished_cpu_ms": _p50(finished_cpu),
            "sample_ms": _p50(sample_wall),
            "sample_cpu_ms": _p50(sample_cpu),
            "ticks": float(ticks),
            "per_sample": float(per_sample),
        }
    finally:
        history.close()
        await store.close()
        for child in folder.iterdir():
            child.unlink()
        folder.rmdir()


def _failure_row(at_ms: int, rng: random.Random, i: int) -> tuple[Any, ...]:
    k = rng.randrange(len(MESSAGES))
    message = MESSAGES[k].format(n=rng.randrange(100_000))
    error = (
        f'{{"type":"{TYPES[k % len(TYPES)]}","code":"handler_error","message":"{message}",'
        '"retryable":false,"details":{}}'
    )
    created = at_ms - rng.randint(5, 20_000)
    task_id = f"task_sim{i:012d}{rng.randrange(16**8):08x}"
    return (
        task_id, NAMES[rng.randrange(len(NAMES))], QUEUES[i % len(QUEUES)], "failed",
        f'{{"n":{i}}}', None, error, "{}", None, None, rng.randint(1, 3), 3, 0, None, None,
        created, None, None, None, None, created, at_ms, at_ms,
    )  # fmt: skip


def _queued_rows(start_ms: int) -> list[tuple[Any, ...]]:
    """A steady backlog: 50 queued tasks per queue, 2 running ones held by workers."""
    rows = []
    for i in range(len(QUEUES) * 52):
        queue, running = QUEUES[i % len(QUEUES)], i < 2 * len(QUEUES)
        rows.append(
            (
                f"task_simq{i:08d}", NAMES[i % len(NAMES)], queue,
                "running" if running else "queued", "{}", None, None, "{}", None, None,
                1 if running else 0, 3, 0, f"worker_{i % 2}" if running else None,
                start_ms + 10 * WEEK_MS if running else None, start_ms, None, None, None,
                None, start_ms, start_ms, None,
            )
        )  # fmt: skip
    return rows


def _on_disk(path: Path) -> int:
    """The history file's bytes on disk, its WAL included."""
    wal = Path(f"{path}-wal")
    return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


async def simulate_week(
    *, days: float = 7.0, failures: int = 100_000, seed: int = 5
) -> dict[str, float]:
    """Drive the recorder over ``days`` of simulated samples; the file's size."""
    from cairnq_tui.history import SAMPLE_EVERY_S, HistoryFile, Recorder
    from engine import SQLiteStore
    from engine.inspection import Inspector

    rng = random.Random(seed)
    span_ms = int(days * 24 * 3_600_000)
    start = 1_780_000_000_000
    times = sorted(start + rng.randrange(span_ms) for _ in range(int(failures * days / 7)))
    work = Path(tempfile.mkdtemp(prefix="cairnq-recorder-week-"))
    shm = Path("/dev/shm")
    hist_dir = Path(
        tempfile.mkdtemp(prefix="cairnq-recorder-hist-", dir=shm if shm.is_dir() else None)
    )
    db = work / "cairnq.db"
    store = SQLiteStore(str(db))
    await store.connect()
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("pragma synchronous=off")
    insert = f"insert into cairnq_tasks values ({','.join('?' * 23)})"
    conn.executemany(insert, _queued_rows(start))
    now = start
    history = HistoryFile(hist_dir / "history.sqlite3", target="bench-week")
    inspector = Inspector(store, clock=lambda: now)
    recorder = Recorder(inspector, history, lambda: now)
    step = int(SAMPLE_EVERY_S * 1000)
    t0, c0 = time.perf_counter(), time.process_time()
    sizes_max, next_i, samples = 0, 0, 0
    try:
        while now < start + span_ms:
            now += step
            batch = []
            while next_i < len(times) and times[next_i] <= now:
                batch.append(_failure_row(times[next_i], rng, next_i))
                next_i += 1
            if batch:
                conn.executemany(insert, batch)
            if samples % 360 == 0:  # an hour: the database's own retention
                conn.execute(
                    "delete from cairnq_tasks where status = 'failed' and completed_at_ms < ?",
                    (now - 3_600_000,),
                )
            await recorder.sample()
            samples += 1
            if samples % 360 == 0:
                sizes_max = max(sizes_max, _on_disk(history.path))
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        counts = history.counts()
        size = _on_disk(history.path)
        return {
            "samples": float(samples),
            "sample_every_s": SAMPLE_EVERY_S,
            "failures_inserted": float(next_i),
            "failures_in_file": float(counts["failures"]),
            "sample_rows": float(counts["samples"]),
            "size_mb": size / 1024 / 1024,
            "size_max_mb": max(sizes_max, size) / 1024 / 1024,
            "wall_s": wall,
            "cpu_s": cpu,
        }
    finally:
        history.close()
        conn.close()
        await store.close()
        for folder in (work, hist_dir):
            for child in folder.iterdir():
                child.unlink()
            folder.rmdir()


def run(*, tasks: int = 100_000, days: float = 7.0) -> tuple[list[str], bool]:
    """Both rows; the printed lines and whether a target was missed."""
    from cairnq_tui.history import SAMPLE_EVERY_S
    from cairnq_tui.history._recorder import FINISHED_EVERY_MS
    from cairnq_tui.settings import Settings

    refresh_s = Settings.__dataclass_fields__["refresh_s"].default
    assert isinstance(refresh_s, float)
    load = os.getloadavg()
    tick = asyncio.run(measure_tick(build_sqlite(tasks)))
    per_sample = tick["per_sample"]
    per_finished = FINISHED_EVERY_MS / 1000 / refresh_s  # ticks per read of finished counts
    finished_cpu = tick["finished_cpu_ms"] / per_finished

    def ratio(arm: str) -> tuple[float, float]:
        wall = tick[f"{arm}_ms"] / tick["alone_ms"] - 1
        cpu = (tick[f"{arm}_cpu_ms"] + finished_cpu) / tick["alone_cpu_ms"] - 1
        return wall, cpu

    added, added_cpu = ratio("after")
    worst, worst_cpu = ratio("together")
    lines = [
        f"recorder: load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} on "
        f"{os.cpu_count()} cores; refresh every {refresh_s:g} s, a sample every "
        f"{SAMPLE_EVERY_S:g} s",
        f"  tick on {tasks:,} tasks ({len(NAMES)} names, {tasks // 10:,} failed), "
        f"{tick['ticks']:.0f} per arm, interleaved; a sample with 1 tick in "
        f"{per_sample:g}; mean wall ms [process cpu ms per tick]",
        f"    {'Tasks tick alone, mean (p50)':<50} {tick['alone_ms']:8.2f} "
        f"({tick['alone_p50_ms']:.2f}) [{tick['alone_cpu_ms']:.2f}]",
        f"    {'tick + note_rows, a sample after it (the console)':<50} "
        f"{tick['after_ms']:8.2f} ({tick['after_p50_ms']:.2f}) [{tick['after_cpu_ms']:.2f}]",
        f"    {'tick + note_rows, a sample started with it':<50} "
        f"{tick['together_ms']:8.2f} [{tick['together_cpu_ms']:.2f}]",
        f"    {'  the ticks a sample started with, p50':<50} {tick['together_p50_ms']:8.2f}",
        f"    {'  Recorder.sample() awaited alone, p50 of 30':<50} {tick['sample_ms']:8.2f} "
        f"[{tick['sample_cpu_ms']:.2f}]",
        f"    {'  counts of finished tasks (1 tick in ' + f'{per_finished:g}), p50':<50} "
        f"{tick['finished_ms']:8.2f} [{tick['finished_cpu_ms']:.2f}]",
    ]
    ok_tick = added <= 0.05
    lines += [
        f"    {'recorder per tick, sampling after a tick':<50} {added * 100:+7.1f} % "
        f"[cpu {added_cpu * 100:+.1f} %]  (target <= 5 %: {'ok' if ok_tick else 'MISSED'})",
        f"    {'  if a sample started with a tick':<50} {worst * 100:+7.1f} % "
        f"[cpu {worst_cpu * 100:+.1f} %]",
    ]
    week = asyncio.run(simulate_week(days=days))
    ok_size = week["size_mb"] <= 50
    lines += [
        f"  history file after {days:g} simulated days: {week['samples']:,.0f} samples, "
        f"{week['failures_inserted']:,.0f} failures arriving ({len(QUEUES)} queues, "
        f"{len(NAMES)} names, {len(MESSAGES)} messages)",
        f"    {'file size with its WAL (largest seen)':<50} {week['size_mb']:8.1f} MB "
        f"({week['size_max_mb']:.1f})  (target <= 50 MB: {'ok' if ok_size else 'MISSED'})",
        f"    {'rows kept: samples / failures':<50} {week['sample_rows']:,.0f} / "
        f"{week['failures_in_file']:,.0f}  (a row per sample: what changed)",
        f"    {'simulation took, wall [cpu]':<50} {week['wall_s']:8.1f} s [{week['cpu_s']:.1f}]",
    ]
    end = os.getloadavg()
    lines.append(f"  load average at the end {end[0]:.1f} / {end[1]:.1f} / {end[2]:.1f}")
    return lines, not (ok_tick and ok_size)
