"""A submitting process for the reliability scenarios, driven by its arguments.

Submits ``--count`` tasks with ``--parallel`` submits in flight, a quarter (by
default) of them under keys drawn from a small shared key space so that
submitters collide on keys. Every acknowledged submit is logged (task id, key,
whether a new task was created); every error raised to this caller is logged
with its type, and the submit is tried again after a pause (an outage must not
stop the run; an unacknowledged submit may or may not have landed, which the
checker tolerates: only acknowledged ones must exist).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import random
import time
from typing import Any

from reliability_harness import Ledger


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--sqlite")
    p.add_argument("--pg")
    p.add_argument("--schema")
    p.add_argument("--ledger", required=True)
    p.add_argument("--impl", default="engine", choices=("engine", "cairnq"))
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--parallel", type=int, default=8)
    p.add_argument("--key-every", type=int, default=4, help="every Nth task is keyed (0: none)")
    p.add_argument("--key-space", type=int, default=200)
    p.add_argument("--conflict", default="reuse")
    p.add_argument("--batch-every", type=int, default=3, help="every Nth task is rel.batch")
    p.add_argument("--fail-every", type=int, default=0, help="every Nth task fails once first")
    p.add_argument("--max-attempts", type=int, default=5)
    p.add_argument("--rate", type=float, default=0.0, help="submits per second (0: flat out)")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args()


def build_client(args: argparse.Namespace) -> Any:
    mod = importlib.import_module(args.impl)
    if args.sqlite:
        return mod.CairnQ.sqlite(args.sqlite)
    return mod.CairnQ.postgres(args.pg, schema=args.schema, min_size=1, max_size=4)


async def main() -> None:
    args = parse()
    rng = random.Random(args.seed)
    ledger = Ledger(args.ledger, "submitter")
    client = build_client(args)
    await client.connect()
    counter = iter(range(args.count))
    started = time.monotonic()

    async def submit_one(n: int) -> None:
        keyed = args.key_every and n % args.key_every == 0
        key = f"key-{rng.randrange(args.key_space)}" if keyed else None
        name = "rel.batch" if args.batch_every and n % args.batch_every == 1 else "rel.single"
        fail = args.fail_every and n % args.fail_every == 2
        payload = {"n": n, "by": ledger.pid, "fail_attempts": 1 if fail else 0}
        while True:
            try:
                task = await client.submit(
                    name,
                    payload,
                    key=key,
                    conflict=args.conflict,
                    max_attempts=args.max_attempts,
                    metadata={"key": key} if key else None,
                )
            except Exception as exc:  # every error a caller sees is on record
                ledger.write("error", type=type(exc).__name__, err=str(exc)[:300], op="submit")
                await asyncio.sleep(0.2)
                continue
            new = task.payload == payload
            ledger.write("submit", id=task.id, key=key, new=new, n=n)
            return

    async def lane() -> None:
        for n in counter:
            if args.rate > 0:
                due = started + n / args.rate
                await asyncio.sleep(max(0.0, due - time.monotonic()))
            await submit_one(n)

    try:
        await asyncio.gather(*(lane() for _ in range(args.parallel)))
    finally:
        await client.close()
        ledger.write("exit")


if __name__ == "__main__":
    asyncio.run(main())
