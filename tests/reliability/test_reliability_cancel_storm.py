"""Scenario 5: cancel storms and replace races on the same tasks and keys.

A worker runs tasks that leave running by every exit (return, ordinary
exception with attempts left, permanent ``TaskError``, ``ctx.fail``) while, all
at once, a canceler fires ``cancel`` at tasks that are running or queued, two
replacers ``submit(..., conflict="replace")`` (and now and then ``reuse``) on a
small key space, a ghost claims tasks and abandons them (so that lease recovery
is an exit too), and a reader resolves every key over and over.

Claims: cancel wins over every exit from running (a row with a cancel request
always ends ``canceled``; every task ``cancel`` returned ends ``canceled``); a key
always resolves to exactly one task (never to nothing once used, always a task
of that key); no key ever has two live tasks not asked to cancel (sampled in
consistent reads all along); the tasks a key no longer points at all end terminal.
"""

from __future__ import annotations

import asyncio
import importlib
import random
import time
from collections import Counter
from typing import Any

from reliability_harness import KeyMonitor, Target, impl, read_keys, read_tasks

MODES = ("return", "raise", "taskerror", "ctxfail")
KEYS = [f"storm-{i}" for i in range(8)]
STORM_S = 3.0
GHOST = "worker_ghost"
EXITS = {*MODES, "recovery"}


def open_worker(mod: Any, target: Target) -> Any:
    common: dict[str, Any] = {
        "concurrency": 8,
        "lease_ms": 600,
        "poll_interval_ms": 20,
        "retry_backoff_ms": 10,
        "retry_backoff_max_ms": 40,
    }
    if target.dialect == "sqlite":
        return mod.Worker.sqlite(target.location, **common)
    return mod.Worker.postgres(target.location, schema=target.schema, max_size=4, **common)


def exits_of(rows: dict[str, Any]) -> Counter[str]:
    """Cancel requests that reached running tasks, by how each task left running.

    Only a running task keeps ``cancel_requested_at_ms`` (a queued one is canceled
    outright), so these are the cancels that had to win on an exit from running.
    """
    return Counter(
        "recovery" if r["worker_id"] == GHOST else r["payload"]["mode"]
        for r in rows.values()
        if r["cancel_requested_at_ms"] is not None
    )


def open_client(mod: Any, target: Target) -> Any:
    if target.dialect == "sqlite":
        return mod.CairnQ.sqlite(target.location)
    return mod.CairnQ.postgres(target.location, schema=target.schema, max_size=6)


async def test_cancel_always_wins_and_keys_stay_single(target: Target) -> None:
    mod = importlib.import_module(impl())
    rng = random.Random()
    started: list[str] = []  # tasks seen running, the canceler's favourite targets
    submitted: list[str] = []
    cancel_returned: set[str] = set()
    acked_keys: set[str] = set()
    key_misses: list[str] = []
    stop = asyncio.Event()

    worker = open_worker(mod, target)

    @worker.task("storm.run")
    async def run(ctx: Any, payload: dict[str, Any]) -> Any:
        started.append(ctx.task_id)
        await asyncio.sleep(rng.uniform(0, 0.03))
        mode = payload["mode"]
        if mode == "raise":
            raise RuntimeError("retryable, attempts left")
        if mode == "taskerror":
            raise mod.TaskError("permanent")
        if mode == "ctxfail":
            await ctx.fail("asked to fail", retryable=True)
            return None
        return {"done": ctx.task_id}

    async def submit(client: Any, key: str | None = None, conflict: str = "replace") -> None:
        payload = {"mode": rng.choice(MODES)}
        task = await client.submit(
            "storm.run",
            payload,
            key=key,
            conflict=conflict,
            max_attempts=rng.choice((1, 3)),
            metadata={"key": key} if key else None,
        )
        submitted.append(task.id)
        if key:
            acked_keys.add(key)

    async def feeder(client: Any) -> None:
        while not stop.is_set():
            await submit(client)
            await asyncio.sleep(0.002)

    async def replacer(client: Any) -> None:
        while not stop.is_set():
            await submit(client, rng.choice(KEYS), "reuse" if rng.random() < 0.2 else "replace")
            await asyncio.sleep(0.002)

    async def canceler(client: Any) -> None:
        while not stop.is_set():
            pool = started if started and rng.random() < 0.7 else submitted
            if pool:
                task_id = rng.choice(pool[-50:])
                if await client.cancel(task_id) is not None:
                    cancel_returned.add(task_id)
            if rng.random() < 0.2:
                task = await client.cancel_by_key(rng.choice(KEYS))
                if task is not None:
                    cancel_returned.add(task.id)
            await asyncio.sleep(0.001)

    async def ghost(client: Any) -> None:
        while not stop.is_set():
            claimed = await client.store.claim(
                queues=["default"], worker_id=GHOST, lease_ms=300, limit=2
            )
            # The ghost never settles: these leave running by lease recovery.
            started.extend(t.id for t in claimed)
            await asyncio.sleep(0.1)

    async def reader(client: Any) -> None:
        while not stop.is_set():
            for key in list(acked_keys):
                task = await client.get_by_key(key)
                if task is None or task.metadata.get("key") != key:
                    key_misses.append(key)
            await asyncio.sleep(0.005)

    client_a, client_b = open_client(mod, target), open_client(mod, target)
    async with client_a, client_b, worker.background():
        with KeyMonitor(target, interval_s=0.02) as monitor:
            lanes = [
                asyncio.create_task(lane)
                for lane in (
                    feeder(client_a),
                    replacer(client_a),
                    replacer(client_b),
                    canceler(client_b),
                    canceler(client_a),
                    ghost(client_b),
                    reader(client_b),
                )
            ]
            await asyncio.sleep(STORM_S)
            # A loaded machine runs fewer tasks per second: keep the storm going (up
            # to a generous deadline) until cancels have reached every exit.
            deadline = time.monotonic() + 6 * STORM_S
            while time.monotonic() < deadline:
                if set(exits_of(await asyncio.to_thread(read_tasks, target))) >= EXITS:
                    break
                await asyncio.sleep(0.5)
            stop.set()
            await asyncio.gather(*lanes)
            # Drain: the worker finishes the rest; the ghost's leases expire and recover.
            for _ in range(300):
                stats = await client_a.stats()
                if not any(s["queued"] + s["running"] for s in stats.values()):
                    break
                await asyncio.sleep(0.1)

    rows = read_tasks(target)
    keys = read_keys(target)
    statuses = {r["status"] for r in rows.values()}
    assert statuses <= {"succeeded", "failed", "canceled"}, statuses
    print(
        f"storm: {len(rows)} tasks, {len(cancel_returned)} cancels landed,"
        f" {sum(r['cancel_requested_at_ms'] is not None for r in rows.values())} on running rows,"
        f" statuses {sorted((s, sum(r['status'] == s for r in rows.values())) for s in statuses)}"
    )
    # Cancel wins on every exit from running.
    not_won = [
        r for r in rows.values() if r["cancel_requested_at_ms"] and r["status"] != "canceled"
    ]
    assert not_won == [], not_won[:3]
    assert [i for i in cancel_returned if rows[i]["status"] != "canceled"] == []
    # The storm hit running tasks on every exit: complete (return), retryable fail
    # (raise, ctx.fail), permanent fail (TaskError) and lease recovery (the ghost).
    exits = exits_of(rows)
    print("cancel requests by exit from running:", dict(exits))
    assert set(exits) == EXITS, exits
    # A key always resolves to exactly one task of its own.
    assert key_misses == []
    assert set(keys) == acked_keys
    for key, task_id in keys.items():
        assert rows[task_id]["metadata"]["key"] == key
    assert monitor.worst == {} and monitor.samples > 10
