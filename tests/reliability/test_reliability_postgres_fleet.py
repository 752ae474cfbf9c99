"""Scenario 3: the fleet on Postgres, with a server restart in the middle of the run.

Runs on a private cluster this test session starts itself (``private_pg``), so
the restart disturbs nobody using the machine's main server. Four worker
processes (each on its own connection pool) and two submitters share one
schema; once a third of the submits are acknowledged the server is restarted.
Every process must carry on by itself: errors are allowed only while the server
is away, every acknowledged submit must reach a terminal state, nothing is
settled twice, no key gets two live tasks. A second test shows that LISTEN
wakeups come back after a restart, for a watcher and for an idle worker whose
poll interval is far longer than the test allows.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from pathlib import Path

import psycopg
import pytest
from reliability_harness import (
    PrivatePostgres,
    Target,
    assert_clean,
    ci_scale,
    client_for,
    count_events,
    proc_args,
    run_fleet_across_restart,
    spawn,
    stop,
    wait_until,
)

# A skipped private server must fail CI like any skipped Postgres test (CAIRNQ_REQUIRE_PG).
pytestmark = pytest.mark.postgres


def fresh_target(server: PrivatePostgres) -> Target:
    return Target("postgres", server.dsn, f"rel_{uuid.uuid4().hex[:12]}")


@pytest.mark.slow
def test_fleet_survives_a_server_restart(private_pg: PrivatePostgres, ledger_dir: Path) -> None:
    tasks = ci_scale("CAIRNQ_REL_PG_TASKS", 1500)
    run = run_fleet_across_restart(private_pg, fresh_target(private_pg), ledger_dir, tasks=tasks)
    print("scenario 3:", run.result.verdict.summary(), f"{run.result.elapsed_s:.1f}s")
    assert_clean(run.result)
    assert run.result.verdict.submitted == tasks
    # Errors reached callers only while the server was away (plus a recovery window).
    assert run.late_errors == [], run.late_errors[:3]
    # Work was acknowledged after the server came back (the run did not finish before it).
    assert run.settled_after > 0


def notify(server: PrivatePostgres, channel: str, payload: str) -> None:
    """NOTIFY from a plain connection: another process, as far as the engine knows."""
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        conn.execute("select pg_notify(%s, %s)", (channel, payload))


async def wait_for_signal(server: PrivatePostgres, seen: list[str], probe: str) -> float:
    """Send NOTIFYs until the watcher reports ``probe``; seconds it took (fails after 45 s)."""
    started = time.monotonic()
    while probe not in seen:
        assert time.monotonic() - started < 45, "no LISTEN wakeup within 45 s"
        with contextlib.suppress(psycopg.OperationalError):  # the server is still starting
            await asyncio.to_thread(notify, server, "cairnq_queued", probe)
        await asyncio.sleep(0.3)
    return time.monotonic() - started


async def test_listen_wakeups_come_back_after_restart(
    private_pg: PrivatePostgres, ledger_dir: Path
) -> None:
    target = fresh_target(private_pg)
    seen: list[str] = []
    async with client_for(target) as client:
        unsubscribe = client.watch(
            lambda sig: seen.append(sig.queue) if sig.reason == "queued" else None,
            poll_ms=60_000,
        )
        # An idle worker that would not poll again within this test: only a wake
        # can make it pick up a task quickly.
        worker = spawn(
            "proc_worker.py", *proc_args(target, ledger_dir), "--poll-ms", "60000", "--work-ms", "0"
        )
        try:
            wait_until(lambda: count_events(ledger_dir, "ready") == 1, 30, "the worker")
            await wait_for_signal(private_pg, seen, "before-restart")
            await asyncio.sleep(0.5)  # the worker's first claim finds nothing; it sleeps

            await asyncio.to_thread(private_pg.restart, "fast")
            await wait_for_signal(private_pg, seen, "after-restart")

            # The worker's claims fail while the server is away and it retries; let it
            # settle back into its 60 s sleep so that only a wake can explain a pickup.
            await asyncio.sleep(2)
            # Its own listener reconnects on its own schedule (backoff from 1 s): a
            # submit must wake it long before its next poll.
            deadline = time.monotonic() + 40
            picked_up = False
            while not picked_up and time.monotonic() < deadline:
                task = await client.submit("rel.single", {"n": 0})
                sent = time.monotonic()
                while time.monotonic() - sent < 5:
                    status = await client.get_status(task.id)
                    if status is not None and status.status == "succeeded":
                        picked_up = True
                        break
                    await asyncio.sleep(0.1)
            assert picked_up, "the idle worker was never woken after the restart"
        finally:
            unsubscribe()
            assert stop(worker).count("Traceback") == 0
