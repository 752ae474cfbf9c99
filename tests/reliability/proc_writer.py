"""A process that writes as fast as it can and says "done" for each acknowledged write.

Scenario 4 kills it with SIGKILL at a random moment, most likely inside a write
transaction, then checks that everything it printed as done is in the database.
Each acknowledged write is printed (and flushed) only after the call returned:

* ``--mode group``: many concurrent single-statement writes (unkeyed submits,
  completes of claimed tasks), which the SQLite store groups into shared
  transactions — ``done submit <id>`` / ``done complete <id>``;
* ``--mode keyed``: concurrent keyed submits (``replace`` and ``reuse``) on a
  small key space — ``done keyed <key> <id> <conflict>``;
* ``--mode migrate``: open a (new) database, which migrates it — ``done migrated``.

``ready`` is printed once the store is open (for ``migrate``: just before it opens).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import itertools
import sys
from typing import Any


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--sqlite")
    p.add_argument("--pg")
    p.add_argument("--schema")
    p.add_argument("--ledger")  # accepted for symmetry with the other proc scripts
    p.add_argument("--impl", default="engine", choices=("engine", "cairnq"))
    p.add_argument("--mode", required=True, choices=("group", "keyed", "migrate"))
    p.add_argument("--lanes", type=int, default=16)
    p.add_argument("--key-space", type=int, default=8)
    return p.parse_args()


def say(*words: object) -> None:
    sys.stdout.write(" ".join(map(str, words)) + "\n")
    sys.stdout.flush()


def build_client(args: argparse.Namespace) -> Any:
    mod = importlib.import_module(args.impl)
    if args.sqlite:
        return mod.CairnQ.sqlite(args.sqlite)
    return mod.CairnQ.postgres(args.pg, schema=args.schema, min_size=1, max_size=args.lanes)


async def submit_lane(client: Any, lane: int) -> None:
    for n in itertools.count():
        task = await client.submit("rel.write", {"lane": lane, "n": n})
        say("done submit", task.id)


async def complete_lane(client: Any, worker_id: str) -> None:
    store = client.store
    while True:
        claimed = await store.claim(
            queues=["default"], worker_id=worker_id, lease_ms=600_000, limit=4
        )
        if not claimed:
            await asyncio.sleep(0.005)
        for task in claimed:
            await store.complete(task_id=task.id, worker_id=worker_id, result={"ok": task.id})
            say("done complete", task.id)


async def keyed_lane(client: Any, lane: int, key_space: int) -> None:
    for n in itertools.count():
        key = f"k{(lane * 7 + n) % key_space}"
        conflict = "replace" if n % 3 else "reuse"
        task = await client.submit(
            "rel.write", {"lane": lane, "n": n}, key=key, conflict=conflict, metadata={"key": key}
        )
        say("done keyed", key, task.id, conflict)


async def main() -> None:
    args = parse()
    client = build_client(args)
    if args.mode == "migrate":
        say("ready")
        await client.connect()
        say("done migrated")
        await client.close()
        return
    await client.connect()
    say("ready")
    if args.mode == "group":
        lanes = [submit_lane(client, i) for i in range(args.lanes // 2)]
        lanes += [complete_lane(client, f"worker_writer{i}") for i in range(args.lanes // 2)]
    else:
        lanes = [keyed_lane(client, i, args.key_space) for i in range(args.lanes)]
    await asyncio.gather(*lanes)


if __name__ == "__main__":
    asyncio.run(main())
