"""A worker process for the reliability scenarios, driven by its arguments.

It registers ``rel.single`` and ``rel.batch`` (batched), logs every run to its
ledger (start, settlement acknowledged, lease lost, planned failure) and
settles explicitly with ``ctx.succeed`` so that each acknowledged settlement is
on record. ``--hang`` makes every handler block after logging its start: the
process then holds leases until it is killed. SIGTERM stops it cleanly.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import random
import signal
from typing import Any

from reliability_harness import Ledger


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--sqlite")
    p.add_argument("--pg")
    p.add_argument("--schema")
    p.add_argument("--ledger", required=True)
    p.add_argument("--impl", default="engine", choices=("engine", "cairnq"))
    p.add_argument("--queues", default="default")
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--lease-ms", type=int, default=1000)
    p.add_argument("--poll-ms", type=int, default=100)
    p.add_argument("--work-ms", type=float, default=2.0, help="mean handler time")
    p.add_argument("--hang", action="store_true", help="block forever after logging the start")
    p.add_argument("--pool-size", type=int, default=4)
    return p.parse_args()


def build_worker(args: argparse.Namespace, on_error: Any) -> Any:
    mod = importlib.import_module(args.impl)
    common: dict[str, Any] = {
        "queues": tuple(args.queues.split(",")),
        "concurrency": args.concurrency,
        "lease_ms": args.lease_ms,
        "poll_interval_ms": args.poll_ms,
        "retry_backoff_ms": 50,
        "retry_backoff_max_ms": 200,
        "on_error": on_error,
    }
    if args.sqlite:
        return mod.Worker.sqlite(args.sqlite, **common)
    return mod.Worker.postgres(
        args.pg, schema=args.schema, min_size=1, max_size=args.pool_size, **common
    )


async def main() -> None:
    args = parse()
    ledger = Ledger(args.ledger, "worker")

    def on_error(exc: BaseException, info: dict[str, Any]) -> None:
        ledger.write("error", type=type(exc).__name__, err=str(exc)[:300], info=info)

    worker = build_worker(args, on_error)
    mod = importlib.import_module(args.impl)

    async def run_one(ctx: Any) -> None:
        ledger.write("start", id=ctx.task_id, attempt=ctx.attempt, worker=ctx.worker_id)
        payload = ctx.payload or {}
        if args.hang:
            await asyncio.Event().wait()
        if args.work_ms > 0:
            await asyncio.sleep(random.expovariate(1 / args.work_ms) / 1000)
        if ctx.attempt <= int(payload.get("fail_attempts", 0)):
            ledger.write("fail", id=ctx.task_id, attempt=ctx.attempt)
            raise RuntimeError("planned failure")
        result = {"pid": os.getpid(), "attempt": ctx.attempt, "echo": payload.get("n")}
        try:
            task = await ctx.succeed(result)
        except mod.LostLease:
            ledger.write("lost", id=ctx.task_id, attempt=ctx.attempt)
            raise
        except Exception as exc:
            # The write itself failed (server gone): not acknowledged, so the task
            # runs again once its lease expires — at-least-once, with a reason.
            ledger.write(
                "unsettled",
                id=ctx.task_id,
                attempt=ctx.attempt,
                type=type(exc).__name__,
                err=str(exc)[:300],
            )
            raise
        if task is not None:
            ledger.write("settle", id=ctx.task_id, attempt=ctx.attempt, status=task.status)

    async def single(ctx: Any) -> None:
        await run_one(ctx)

    async def batch(ctxs: list[Any]) -> None:
        outcomes = await asyncio.gather(*(run_one(c) for c in ctxs), return_exceptions=True)
        for ctx, outcome in zip(ctxs, outcomes, strict=True):
            # One task of the batch failing must not decide the others' fate: the
            # worker settles leftovers by how the call ended, so fail it here.
            if isinstance(outcome, RuntimeError) and not ctx.settled:
                await ctx.fail(str(outcome))

    worker.register("rel.single", single)
    worker.register("rel.batch", batch, batch=args.batch)

    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, worker.stop)
    ledger.write("ready", worker=getattr(worker, "worker_id", None))
    try:
        await worker.run()
    finally:
        await worker.close()
        ledger.write("exit")


if __name__ == "__main__":
    asyncio.run(main())
