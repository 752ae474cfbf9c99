"""Scenario 4: a process killed with SIGKILL inside a write transaction.

``proc_writer.py`` writes flat out and prints ``done …`` for each write only
after the call returned; it is killed at a random moment. Afterwards the
database must be valid (SQLite: ``integrity_check`` and ``foreign_key_check``),
still open and migrate, and hold every write its caller was told was done:

* group commit: every printed submit exists, every printed complete is
  ``succeeded`` with its result;
* keyed submits: every printed task exists, and is either the task its key
  points to or was canceled by a later ``replace`` — never a live orphan; no key
  has two live tasks;
* migrations on a new database: kills at spread-out moments of the first open,
  round after round on the same database; the last open completes the schema.
"""

from __future__ import annotations

import random
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest
from psycopg.conninfo import make_conninfo
from reliability_harness import (
    Target,
    client_for,
    kill9,
    live_keys_over_one,
    proc_args,
    read_keys,
    read_tasks,
    spawn,
    stderr_of,
    wait_until,
)


def run_and_kill(
    target: Target, ledger_dir: Path, mode: str, delay_s: float, *, after: int = 0
) -> list[list[str]]:
    """Start a writer; once it said ready and ``after`` writes were done, wait
    ``delay_s`` and kill it. Returns the "done" lines it printed."""
    tag = f"rel-writer-{uuid.uuid4().hex[:8]}"
    writer_target = target
    if target.dialect == "postgres":
        # Named connections, so that we can wait for the server to finish with them.
        location = make_conninfo(target.location, application_name=tag)
        writer_target = Target("postgres", location, target.schema)
    proc = spawn("proc_writer.py", *proc_args(writer_target, ledger_dir), "--mode", mode,
                 stdout=subprocess.PIPE)  # fmt: skip
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if line != b"ready\n":
        proc.wait()
        proc.stdout.close()
        err = stderr_of(proc)
        raise AssertionError(f"writer did not start: {line!r}\n{err}")
    # Drain the pipe all along: a full pipe would block the writer, not kill it mid-write.
    chunks: list[bytes] = []
    reader = threading.Thread(target=lambda: chunks.extend(iter(proc.stdout.readline, b"")))
    reader.start()
    deadline = time.monotonic() + 30
    while len(chunks) < after and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.005)
    time.sleep(delay_s)
    kill9(proc)
    reader.join()
    proc.stdout.close()
    if target.dialect == "postgres":
        # The server may still be running (and committing) what the dead client sent
        # last; that is fine, but every check below must see the final state.
        wait_until(
            lambda: (
                not target.rows("select 1 from pg_stat_activity where application_name = ?", [tag])
            ),
            20,
            "the killed client's backends to end",
        )
    # Only whole lines count: a torn last line was never a completed "done".
    lines = [c.decode() for c in chunks if c.endswith(b"\n")]
    return [ln.split()[1:] for ln in lines if ln.startswith("done ")]


async def assert_database_sound(target: Target) -> None:
    """Valid file, opens (and migrates) again, accepts a write and reads it back."""
    if target.dialect == "sqlite":
        with target.connect() as conn:
            assert conn.execute("pragma integrity_check").fetchall()[0][0] == "ok"
            assert conn.execute("pragma foreign_key_check").fetchall() == []
    async with client_for(target) as client:
        task = await client.submit("rel.after", {"ok": True})
        assert (await client.get(task.id)).payload == {"ok": True}
    meta = {r["key"]: r["value"] for r in target.rows("select key, value from cairnq_meta")}
    assert meta == {"protocol_version": "1", "schema_version": "10"}


@pytest.mark.parametrize("after", [20, 500])
async def test_kill_during_group_commit(target: Target, ledger_dir: Path, after: int) -> None:
    done = run_and_kill(target, ledger_dir, "group", random.uniform(0, 0.3), after=after)
    submitted = [d[1] for d in done if d[0] == "submit"]
    completed = [d[1] for d in done if d[0] == "complete"]
    print(f"group commit: {len(submitted)} submits, {len(completed)} completes told done")
    assert len(done) >= after, "the writer hardly wrote; the kill proves nothing"
    rows = read_tasks(target)
    missing = [i for i in submitted if i not in rows]
    assert missing == [], f"{len(missing)} acknowledged submits lost"
    for i in completed:
        assert rows[i]["status"] == "succeeded" and rows[i]["result"] == {"ok": i}, rows[i]
    await assert_database_sound(target)


@pytest.mark.parametrize("after", [20, 500])
async def test_kill_during_keyed_submits(target: Target, ledger_dir: Path, after: int) -> None:
    done = run_and_kill(target, ledger_dir, "keyed", random.uniform(0, 0.3), after=after)
    print(f"keyed: {len(done)} keyed submits told done")
    assert len(done) >= after, "the writer hardly wrote; the kill proves nothing"
    rows = read_tasks(target)
    keys = read_keys(target)
    for _, key, task_id, _conflict in done:
        row = rows.get(task_id)
        assert row is not None, f"acknowledged keyed submit {task_id} lost"
        assert row["metadata"]["key"] == key
        assert keys[key] == task_id or row["status"] == "canceled", (key, row, rows[keys[key]])
    for key, task_id in keys.items():
        assert rows[task_id]["metadata"]["key"] == key
    assert live_keys_over_one(target) == {}
    await assert_database_sound(target)


async def test_kill_during_migrations(target: Target, ledger_dir: Path) -> None:
    # How long a first open takes here, so that the kills spread across it.
    start = time.monotonic()
    async with client_for(target):
        pass
    took = time.monotonic() - start
    # The rounds then run on a database (file or schema) that does not exist yet.
    fresh = (
        Target("sqlite", target.location + "-fresh")
        if target.dialect == "sqlite"
        else Target("postgres", target.location, f"{target.schema}_m")
    )
    rounds = 8
    try:
        interrupted = sum(
            not run_and_kill(fresh, ledger_dir, "migrate", took * i / rounds) for i in range(rounds)
        )
        print(
            f"migrations: {interrupted}/{rounds} opens killed before done; first open {took:.3f}s"
        )
        assert interrupted >= 1, "no kill landed before the migrations finished"
        await assert_database_sound(fresh)
        ledger = fresh.rows("select name from cairnq_migrations")
        assert len(ledger) == (9 if fresh.dialect == "sqlite" else 10)
    finally:
        if fresh.dialect == "postgres":
            with fresh.connect() as conn:
                conn.execute(f'drop schema if exists "{fresh.schema}" cascade')
