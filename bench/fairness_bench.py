"""Mixed-fleet fairness: processes of both kinds sharing one SQLite file.

Run from the repository root::

    python bench/fairness_bench.py [--seconds 10] [--cairnq 1] [--engine 2]
                                   [--batch 16] [--synchronous full|normal]

One fresh database file (migrated before the fleet starts, so no cold-start
race is measured); then ``--cairnq`` cairnq 0.15.1 processes and ``--engine``
engine processes start together and, for ``--seconds``, each repeats on its
own queue: ``--batch`` serial submits, one ``claim(limit=batch)``, then one
``complete`` per claimed task, each awaited before the next (``--gather``:
the submits, then the completes, as one ``asyncio.gather``). An "op" is one
submit or one complete. Output: ops/s per process with the durability it ran
with (cairnq: the SDK's default, ``synchronous=FULL``), and the slowest
process's share of the mean (``min/mean``); 1.0 is perfectly fair, the target
is at least 0.33.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from store_bench import add_synchronous_option  # noqa: E402  (bench/ is the script's folder)


async def _open(role: str, path: str, synchronous: str) -> tuple[Any, Any]:
    """``(handle to close, store)`` for one side."""
    if role == "cairnq":
        import cairnq

        client = cairnq.CairnQ.sqlite(path)
        await client.connect()
        return client, client.store
    from engine import SQLiteStore

    store = SQLiteStore(path, synchronous=synchronous)  # type: ignore[arg-type]
    await store.connect()
    return store, store


async def member(role: str, path: str, queue: str, args: argparse.Namespace) -> dict[str, Any]:
    """One process of the fleet: submit and drain on its own queue until time is up."""
    handle, store = await _open(role, path, args.synchronous)
    worker = f"{role}-{queue}"
    submits = completes = 0
    try:
        # Everyone starts at the same wall-clock instant.
        await asyncio.sleep(max(0.0, args.start - time.time()))
        started = time.monotonic()
        end = started + args.seconds
        while time.monotonic() < end:
            if args.gather:
                await asyncio.gather(
                    *(
                        store.submit(name="fair", queue=queue, payload={"i": i})
                        for i in range(args.batch)
                    )
                )
                submits += args.batch
            else:
                for i in range(args.batch):
                    await store.submit(name="fair", queue=queue, payload={"i": i})
                    submits += 1
            claimed = await store.claim(queues=[queue], worker_id=worker, limit=args.batch)
            if args.gather:
                await asyncio.gather(
                    *(store.complete(task_id=t.id, worker_id=worker, result=None) for t in claimed)
                )
                completes += len(claimed)
            else:
                for task in claimed:
                    await store.complete(task_id=task.id, worker_id=worker, result=None)
                    completes += 1
        elapsed = time.monotonic() - started
    finally:
        await handle.close()
    durability = "full (SDK default)" if role == "cairnq" else args.synchronous
    return {
        "role": role,
        "queue": queue,
        "durability": durability,
        "submits": submits,
        "completes": completes,
        "ops_per_s": (submits + completes) / elapsed,
    }


def run_fleet(args: argparse.Namespace) -> list[dict[str, Any]]:
    from engine import SQLiteStore

    with tempfile.TemporaryDirectory(prefix="fairness-") as tmp:
        path = str(Path(tmp) / "shared.db")

        async def migrate() -> None:
            store = SQLiteStore(path)
            await store.connect()
            await store.close()

        asyncio.run(migrate())
        roles = ["cairnq"] * args.cairnq + ["engine"] * args.engine
        start = time.time() + 2.0 + 0.3 * len(roles)  # after every process has opened
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "--member",
                    role,
                    "--path",
                    path,
                    "--queue",
                    f"q{index}",
                    "--start",
                    repr(start),
                    "--seconds",
                    str(args.seconds),
                    "--batch",
                    str(args.batch),
                    "--synchronous",
                    args.synchronous,
                    *(["--gather"] if args.gather else []),
                ],
                stdout=subprocess.PIPE,
                text=True,
                cwd=ROOT,
            )
            for index, role in enumerate(roles)
        ]
        results = []
        for proc in procs:
            out, _ = proc.communicate(timeout=args.seconds + 120)
            if proc.returncode != 0:
                raise SystemExit(f"a fleet member failed (exit {proc.returncode})")
            results.append(json.loads(out.strip().splitlines()[-1]))
    return results


def report(results: list[dict[str, Any]], args: argparse.Namespace) -> None:
    rates = [r["ops_per_s"] for r in results]
    mean = sum(rates) / len(rates)
    print(
        f"mixed fleet on one SQLite file: {args.seconds:g} s, batch {args.batch} "
        f"(ops = submits + completes; load average {os.getloadavg()[0]:.1f})"
    )
    print(f"{'process':<10} {'durability':<20} {'submits':>8} {'completes':>9} {'ops/s':>8}")
    for r in results:
        name = f"{r['role']} {r['queue']}"
        print(
            f"{name:<10} {r['durability']:<20} {r['submits']:>8,} {r['completes']:>9,} "
            f"{r['ops_per_s']:>8,.0f}"
        )
    print(f"min/mean {min(rates) / mean:.2f}   max/min {max(rates) / max(min(rates), 1e-9):.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--cairnq", type=int, default=1, help="cairnq processes (default 1)")
    parser.add_argument("--engine", type=int, default=2, help="engine processes (default 2)")
    parser.add_argument("--batch", type=int, default=16, help="submits per drain (default 16)")
    add_synchronous_option(parser)
    parser.add_argument(
        "--gather",
        action="store_true",
        help="submit a batch and complete it with asyncio.gather instead of one by one",
    )
    parser.add_argument("--member", choices=["cairnq", "engine"], help=argparse.SUPPRESS)
    parser.add_argument("--path", help=argparse.SUPPRESS)
    parser.add_argument("--queue", help=argparse.SUPPRESS)
    parser.add_argument("--start", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.member:
        print(json.dumps(asyncio.run(member(args.member, args.path, args.queue, args))))
        return
    report(run_fleet(args), args)


if __name__ == "__main__":
    main()
