"""Scenario 1: a worker killed with SIGKILL while it holds single and batched leases.

A worker process claims every task of a batch (single calls and 4-task batch
calls) and hangs in its handlers; it is then killed with ``kill -9``. A second
worker must pick every one of those tasks up again once the leases expire:
tasks with attempts left succeed on their second run, tasks that were on their
last attempt end ``failed`` with the LeaseExpired envelope, and tasks that had
completed before the kill keep their results untouched. Every task reaches a
terminal state exactly once.
"""

from __future__ import annotations

from pathlib import Path

from reliability_harness import (
    Ledger,
    Target,
    check_run,
    client_for,
    count_events,
    kill9,
    proc_args,
    read_tasks,
    spawn,
    stop,
    wait_drained,
    wait_until,
)

LEASE_MS = 800
LEASE_EXPIRED = {
    "type": "LeaseExpired",
    "code": "lease_expired",
    "message": "task lease expired and max attempts reached",
    "retryable": False,
    "details": {},
}


async def submit_tasks(target: Target, count: int, *, max_attempts: int, tag: str) -> list[str]:
    ids = []
    async with client_for(target) as client:
        for n in range(count):
            name = "rel.batch" if n % 2 else "rel.single"
            task = await client.submit(name, {"n": n, "tag": tag}, max_attempts=max_attempts)
            ids.append(task.id)
    return ids


async def test_killed_worker_leases_are_recovered(target: Target, ledger_dir: Path) -> None:
    base = [*proc_args(target, ledger_dir), "--lease-ms", str(LEASE_MS)]
    orchestrator = Ledger(ledger_dir, "orchestrator")

    # Tasks completed before the crash: their rows must come out untouched.
    done_ids = await submit_tasks(target, 10, max_attempts=3, tag="before")
    first = spawn("proc_worker.py", *base)
    wait_drained(target, 30, expect_at_least=10, watch=[first])
    assert stop(first).count("Traceback") == 0
    before = {i: read_tasks(target)[i] for i in done_ids}
    assert {t["status"] for t in before.values()} == {"succeeded"}

    # 16 tasks with attempts left, 8 on their last attempt; half of each batched.
    retried = await submit_tasks(target, 16, max_attempts=3, tag="retry")
    last = await submit_tasks(target, 8, max_attempts=1, tag="last")
    starts_before = count_events(ledger_dir, "start")
    victim = spawn("proc_worker.py", *base, "--hang", "--concurrency", "32")
    wait_until(
        lambda: count_events(ledger_dir, "start") - starts_before >= 24,
        30,
        "the doomed worker to hold all 24 tasks",
        watch=[victim],
    )
    held = read_tasks(target)
    assert {held[i]["status"] for i in retried + last} == {"running"}
    assert len({held[i]["worker_id"] for i in retried + last}) == 1
    kill9(victim, orchestrator)

    rescuer = spawn("proc_worker.py", *base)
    try:
        wait_drained(target, 30, expect_at_least=34, watch=[rescuer])
    finally:
        assert stop(rescuer).count("Traceback") == 0
    orchestrator.close()

    rows = read_tasks(target)
    assert {i: rows[i] for i in done_ids} == before, "completed tasks changed after the crash"
    for i in retried:
        assert rows[i]["status"] == "succeeded", rows[i]
        assert rows[i]["attempt"] == 2
        assert rows[i]["result"]["attempt"] == 2
    for i in last:
        assert rows[i]["status"] == "failed", rows[i]
        assert rows[i]["error"] == LEASE_EXPIRED
        assert rows[i]["attempt"] == 1

    verdict = check_run(target, ledger_dir)
    assert verdict.failures() == {}, verdict.summary()
    assert verdict.kills == 1
    # Each recovered task ran exactly twice (killed run, rescue run); the last-attempt
    # ones exactly once; the early ones once.
    assert verdict.executions == {1: 18, 2: 16}, verdict.summary()
    assert verdict.reruns_after_loss == 16
    assert verdict.max_recovery_ms >= LEASE_MS // 2
