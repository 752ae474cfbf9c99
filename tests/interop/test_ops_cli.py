"""The operator's command line, run as the installed ``cairnq-tui`` in a subprocess,
on both dialects, against tasks that cairnq 0.15.1 (the peer) wrote."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from interop_support import Backend, rows

SCRIPT = Path(sys.executable).with_name("cairnq-tui")
ERROR = {
    "type": "SmtpTimeout",
    "code": "handler_error",
    "message": "timed out after 30s\nat x",
    "retryable": False,
    "details": {},
}


def cli(
    backend: Backend, *args: str, stdin: str = "", where: list[str] | None = None
) -> subprocess.CompletedProcess[str]:
    target = where if where is not None else target_args(backend)
    command, rest = args[0], list(args[1:])
    return subprocess.run(
        [str(SCRIPT), command, *target, *rest],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=120,
    )


def target_args(backend: Backend) -> list[str]:
    if backend.dialect == "sqlite":
        return [backend.location]
    return [backend.location, "--schema", str(backend.schema)]


def json_lines(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def statuses(backend: Backend) -> dict[str, str]:
    return dict(rows(backend, "select id, status from cairnq_tasks"))  # type: ignore[arg-type]


async def seed(backend: Backend) -> dict[str, Any]:
    """Tasks written by the peer: queued, keyed, failed with an envelope, succeeded."""
    peer = backend.peer()
    await peer.connect()
    try:
        made = {
            "mail1": await peer.submit(
                name="send_email", payload={"to": "a"}, queue="emails", key="welcome-1"
            ),
            "mail2": await peer.submit(name="send_email", payload={"to": "b"}, queue="emails"),
            "resize": await peer.submit(name="resize", payload={"w": 3}),
            "broken": await peer.submit(name="charge", payload={"n": 1}, queue="billing"),
            "done": await peer.submit(name="charge", payload={"n": 2}, queue="billing"),
        }
        claimed = await peer.claim(queues=["billing"], worker_id="w1", lease_ms=30_000, limit=2)
        assert {t.id for t in claimed} == {made["broken"].id, made["done"].id}
        await peer.fail(task_id=made["broken"].id, worker_id="w1", error=ERROR, retryable=False)
        await peer.succeed(task_id=made["done"].id, worker_id="w1", result={"ok": True})
        return {k: v.id for k, v in made.items()}
    finally:
        await peer.close()


async def test_tasks_lists_what_the_peer_wrote(backend: Backend) -> None:
    ids = await seed(backend)
    listed = cli(backend, "tasks", "--json")
    assert listed.returncode == 0, listed.stderr
    lines = {line["id"]: line for line in json_lines(listed.stdout)}
    assert set(lines) == set(ids.values())
    keyed = lines[ids["mail1"]]
    assert keyed["key"] == "welcome-1" and keyed["queue"] == "emails"
    assert keyed["created_at"].endswith("Z") and keyed["completed_at"] is None
    broken = lines[ids["broken"]]
    assert (broken["status"], broken["error_type"]) == ("failed", "SmtpTimeout")
    # The list carries the message's first line, as the console's list does.
    assert broken["error_message"] == "timed out after 30s" and broken["worker_id"] == "w1"
    assert lines[ids["done"]]["error_type"] is None
    expected_fields = {
        "id",
        "name",
        "queue",
        "status",
        "attempt",
        "max_attempts",
        "priority",
        "key",
        "run_at",
        "created_at",
        "updated_at",
        "completed_at",
        "error_type",
        "error_message",
        "worker_id",
    }
    assert expected_fields <= set(broken)

    table = cli(backend, "tasks", "--status", "failed")
    assert table.returncode == 0
    assert ids["broken"] in table.stdout and "SmtpTimeout: timed out after 30s" in table.stdout
    assert ids["done"] not in table.stdout
    by_key = json_lines(cli(backend, "tasks", "--key", "welcome", "--json").stdout)
    assert [t["id"] for t in by_key] == [ids["mail1"]]
    by_id = json_lines(cli(backend, "tasks", "--id", ids["resize"][:-3], "--json").stdout)
    assert [t["id"] for t in by_id] == [ids["resize"]]
    two = json_lines(cli(backend, "tasks", "--queue", "emails", "--limit", "1", "--json").stdout)
    assert [t["id"] for t in two] == [ids["mail2"]]  # newest first

    by_error = cli(backend, "tasks", "--error", "smtptimeout", "--json")
    assert [t["id"] for t in json_lines(by_error.stdout)] == [ids["broken"]]
    no_error = cli(backend, "tasks", "--error", "no such text")
    assert no_error.returncode == 0 and no_error.stdout.startswith("No task matches")
    assert "searched" in no_error.stdout  # the window read is said
    oldest = json_lines(cli(backend, "tasks", "--sort", "created", "--json").stdout)
    assert [t["id"] for t in oldest] == sorted(ids.values())
    done_first = json_lines(
        cli(backend, "tasks", "--sort", "-completed", "--since", "1h", "--json").stdout
    )
    assert {t["id"] for t in done_first} == {ids["broken"], ids["done"]}
    assert done_first[0]["completed_at"] >= done_first[1]["completed_at"]
    assert cli(backend, "tasks", "--since", "1h", "--json", "--sort", "-created").stdout.count(
        "\n"
    ) == len(ids)
    for bad in (["--sort", "name"], ["--since", "soon"], ["--error", "x", "--id", "y"]):
        result = cli(backend, "tasks", *bad)
        assert result.returncode == 2, bad
        assert len(result.stderr.strip().splitlines()) == 1

    none = cli(backend, "tasks", "--name", "nobody")
    assert (none.returncode, none.stdout.strip()) == (0, "No task matches (name='nobody').")
    assert cli(backend, "tasks", "--name", "nobody", "--json").stdout == ""
    bad = cli(backend, "tasks", "--key", "a", "--id", "b")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1


async def test_show_prints_the_whole_task(backend: Backend) -> None:
    ids = await seed(backend)
    shown = cli(backend, "show", ids["broken"])
    assert shown.returncode == 0, shown.stderr
    task = json.loads(shown.stdout)
    assert task["payload"] == {"n": 1} and task["error"] == ERROR
    assert (task["status"], task["attempt"], task["error_type"]) == ("failed", 1, "SmtpTimeout")
    done = json.loads(cli(backend, "show", ids["done"]).stdout)
    assert done["result"] == {"ok": True} and done["completed_at"].endswith("Z")
    assert json.loads(cli(backend, "show", ids["mail1"]).stdout)["keys"] == ["welcome-1"]
    missing = cli(backend, "show", "task_0000000000000000000000000")
    assert missing.returncode == 1 and "no task" in missing.stderr


async def test_submit_says_what_happened(backend: Backend) -> None:
    ids = await seed(backend)
    made = cli(
        backend,
        "submit",
        "report",
        "--payload",
        '{"day": 3}',
        "--queue",
        "q",
        "--priority",
        "5",
        "--max-attempts",
        "2",
        "--delay",
        "1h",
        "--json",
    )
    assert made.returncode == 0, made.stderr
    out = json.loads(made.stdout)
    assert out["outcome"] == "created"
    peer = backend.peer()
    await peer.connect()
    try:
        task = await peer.get(out["id"])
        assert (task.name, task.queue, task.priority, task.max_attempts) == ("report", "q", 5, 2)
        assert task.payload == {"day": 3} and task.run_at_ms >= task.created_at_ms + 3_500_000
    finally:
        await peer.close()

    reused = json.loads(cli(backend, "submit", "send_email", "--key", "welcome-1", "--json").stdout)
    assert reused == {"id": ids["mail1"], "outcome": "reused"}
    rejected = cli(backend, "submit", "send_email", "--key", "welcome-1", "--on-conflict", "reject")
    assert rejected.returncode == 1 and "rejected" in rejected.stdout
    assert ids["mail1"] in rejected.stdout
    replaced = cli(
        backend, "submit", "send_email", "--key", "welcome-1", "--on-conflict", "replace", "--json"
    )
    new = json.loads(replaced.stdout)
    assert new["outcome"] == "replaced" and new["id"] != ids["mail1"]
    assert statuses(backend)[ids["mail1"]] == "canceled"

    payload = Path(str(backend.location) + ".json") if backend.dialect == "sqlite" else None
    if payload is not None:
        payload.write_text('{"from": "file"}')
        from_file = json.loads(
            cli(backend, "submit", "x", "--payload", f"@{payload}", "--json").stdout
        )
        assert rows(
            backend, "select payload from cairnq_tasks where id = ?", (from_file["id"],)
        ) == [('{"from":"file"}',)]
    before = len(statuses(backend))
    for bad in (
        ["--payload", "{nope"],
        ["--payload", "@/no/such/file"],
        ["--delay", "soon"],
        ["--on-conflict", "reject"],
        ["--max-attempts", "0"],
    ):
        result = cli(backend, "submit", "x", *bad)
        assert result.returncode == 2, (bad, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert len(statuses(backend)) == before


async def test_cancel_and_retry_count_ask_and_cap(backend: Backend) -> None:
    ids = await seed(backend)
    dry = cli(backend, "cancel", "--queue", "emails", "--dry-run")
    assert dry.returncode == 0
    assert "2 live task(s) to cancel" in dry.stdout
    assert ids["mail1"] in dry.stdout and ids["mail2"] in dry.stdout
    assert statuses(backend)[ids["mail1"]] == "queued"

    declined = cli(backend, "cancel", "--queue", "emails", stdin="n\n")
    assert declined.returncode == 1 and "nothing written" in declined.stderr
    assert statuses(backend)[ids["mail2"]] == "queued"

    capped = cli(backend, "cancel", "--queue", "emails", "--limit", "1", stdin="y\n")
    assert capped.returncode == 0, capped.stderr
    assert "capped at --limit 1" in capped.stdout
    now = statuses(backend)
    assert (now[ids["mail2"]], now[ids["mail1"]]) == ("canceled", "queued")  # newest first

    retried = cli(backend, "retry", ids["broken"], ids["mail1"], "--yes", "--reset-attempts")
    assert retried.returncode == 0, retried.stderr
    assert f"skipped {ids['mail1']}: it is queued" in retried.stderr
    assert "Requeued 1 task(s)" in retried.stdout
    assert rows(
        backend, "select status, attempt from cairnq_tasks where id = ?", (ids["broken"],)
    ) == [("queued", 0)]

    nothing = cli(backend, "retry", "--status", "failed", "--yes")
    assert nothing.returncode == 0 and "No failed or canceled task matches" in nothing.stdout
    before = statuses(backend)
    for bad in (
        ["task_0000000000000000000000000", "--yes"],
        [],
        ["--status", "succeeded"],
        ["--queue", "emails", ids["resize"]],
    ):
        result = cli(backend, "cancel", *bad)
        assert result.returncode == 2, (bad, result.stdout, result.stderr)
    assert statuses(backend) == before


async def test_purge_follows_the_console_cutoff(backend: Backend) -> None:
    ids = await seed(backend)
    dry = cli(backend, "purge", "--older-than", "0", "--dry-run")
    assert dry.returncode == 0 and "2 task(s) to purge" in dry.stdout
    listed = [line for line in dry.stdout.splitlines() if line.startswith("task_")]
    assert sorted(listed) == sorted([ids["broken"], ids["done"]])
    young = cli(backend, "purge", "--older-than", "1h", "--yes")
    assert young.returncode == 0 and "nothing to purge" in young.stdout
    only = cli(backend, "purge", "--older-than", "0", "--status", "failed", "--yes")
    assert only.returncode == 0 and "Purged 1 task(s)" in only.stdout
    left = statuses(backend)
    assert ids["broken"] not in left and left[ids["done"]] == "succeeded"
    for bad in (
        ["--older-than", "0", ids["done"]],
        ["--status", "failed", ids["done"]],
        ["--older-than", "0", "--status", "queued"],
        [],
        ["--older-than", "-1d"],
        # A number without its unit once meant milliseconds: "7" (days, surely)
        # purged every terminal task older than 7 ms.
        ["--older-than", "7"],
    ):
        result = cli(backend, "purge", *bad, "--yes")
        assert result.returncode == 2, (bad, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1
    assert statuses(backend) == left


async def test_stats_per_queue_and_name(backend: Backend) -> None:
    await seed(backend)
    records = json_lines(cli(backend, "stats", "--json").stdout)
    by = {(r["queue"], r["name"]): r for r in records}
    assert by[("billing", None)]["counts"]["failed"] == 1
    assert by[("billing", None)]["failed_last_hour"] == 1
    assert by[("billing", "charge")]["failed_last_hour"] == 1
    assert by[("emails", "send_email")]["failed_last_hour"] == 0
    assert by[("billing", "charge")]["counts"] == {
        "queued": 0,
        "running": 0,
        "succeeded": 1,
        "failed": 1,
        "canceled": 0,
    }
    assert by[("emails", "send_email")]["counts"]["queued"] == 2
    assert by[("emails", None)]["oldest_due_age_s"] >= 0
    assert by[("billing", None)]["oldest_due_age_s"] is None
    table = cli(backend, "stats")
    assert table.returncode == 0 and "send_email" in table.stdout


async def test_failures_are_the_failures_view_groups(backend: Backend) -> None:
    ids = await seed(backend)
    peer = backend.peer()
    await peer.connect()
    try:
        for n in (7, 8):
            task = await peer.submit(name="charge", payload={"n": n}, queue="billing")
            await peer.claim(queues=["billing"], worker_id="w2", lease_ms=30_000)
            error = {**ERROR, "message": f"timed out after {n}s"}
            await peer.fail(task_id=task.id, worker_id="w2", error=error, retryable=False)
    finally:
        await peer.close()
    groups = json_lines(cli(backend, "failures", "--json").stdout)
    assert len(groups) == 1
    [group] = groups
    assert (group["name"], group["error_type"], group["count"]) == ("charge", "SmtpTimeout", 3)
    assert group["message"] == "timed out after <n>s"
    assert group["first_seen"] <= group["last_seen"] and group["example_id"] != ids["broken"]
    assert set(group) == {
        "name",
        "error_type",
        "message",
        "count",
        "first_seen",
        "last_seen",
        "example_id",
    }
    table = cli(backend, "failures", "--since", "all")
    assert table.returncode == 0 and "timed out after <n>s" in table.stdout
    empty = cli(backend, "failures", "--since", "1ms")
    assert empty.returncode == 0 and empty.stdout.startswith("No failures in the window")
    bad = cli(backend, "failures", "--since", "yesterday")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1


async def test_doctor_on_a_healthy_and_on_a_damaged_database(backend: Backend) -> None:
    await seed(backend)
    healthy = cli(backend, "doctor", "--json")
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr
    checks = {c["check"]: c for c in json_lines(healthy.stdout)}
    assert {c["status"] for c in checks.values()} <= {"OK", "WARN"}
    for name in (
        "protocol",
        "schema version",
        "migrations",
        "indexes",
        "synchronous",
        "free disk",
        "expired leases",
        "past their lease",
        "unclaimed queues",
    ):
        assert checks[name]["status"] == "OK", checks[name]
    assert ("journal mode" in checks) == (backend.dialect == "sqlite")
    assert ("clock" in checks) == (backend.dialect == "postgres")

    # A worker gone for good (its one lease ran out), a worker alive whose other task's
    # heartbeats stopped (one lease live, one expired), and a queue nobody claims.
    peer = backend.peer()
    await peer.connect()
    try:
        # Every claim first recovers the expired leases: the short ones are taken
        # last and long enough (3 s) to outlive the claims that follow them.
        await peer.claim(queues=["default"], worker_id="busy", lease_ms=60_000, limit=1)
        await peer.submit(name="report", payload={}, queue="idle")
        await peer.claim(queues=["emails"], worker_id="gone", lease_ms=3_000, limit=1)
        await peer.claim(queues=["emails"], worker_id="busy", lease_ms=3_000, limit=1)
    finally:
        await peer.close()
    await asyncio.sleep(3.2)
    stale = cli(backend, "doctor", "--stale", "1ms")
    assert stale.returncode == 0, stale.stdout
    assert "WARN  expired leases: 1 running task(s)" in stale.stdout
    assert "WARN  past their lease: 1 task(s) still running past their lease" in stale.stdout
    assert "(busy)" in stale.stdout
    assert "WARN  unclaimed queues: due tasks nobody claims: idle" in stale.stdout
    assert "OK    unclaimed queues" not in stale.stdout

    if backend.dialect == "sqlite":
        import sqlite3

        with sqlite3.connect(backend.location) as db:
            db.execute("delete from cairnq_migrations where name = '0009_purge_queue_index.sql'")
    else:
        import psycopg

        with psycopg.connect(backend.location, autocommit=True) as conn:
            conn.execute(
                f'delete from "{backend.schema}".cairnq_migrations '
                "where name = '0009_purge_queue_index.sql'"
            )
    unmigrated = cli(backend, "doctor")
    assert unmigrated.returncode == 1, unmigrated.stdout
    assert "FAIL  migrations: 1 of" in unmigrated.stdout
    assert "0009_purge_queue_index.sql" in unmigrated.stdout

    drop = "drop index cairnq_tasks_lease_idx"
    if backend.dialect == "sqlite":
        import sqlite3

        with sqlite3.connect(backend.location) as db:
            db.execute(drop)
    else:
        import psycopg

        with psycopg.connect(backend.location, autocommit=True) as conn:
            conn.execute(f'drop index "{backend.schema}".cairnq_tasks_lease_idx')
    damaged = cli(backend, "doctor")
    assert damaged.returncode == 1, damaged.stdout
    assert "FAIL" in damaged.stdout and "cairnq_tasks_lease_idx missing" in damaged.stdout


def test_writes_are_refused_before_the_database_is_touched(tmp_path: Path) -> None:
    # Nothing answers on port 1: a refusal that came after connecting would say so.
    nowhere = "postgresql://postgres@127.0.0.1:1/nowhere"
    for command in (
        ["cancel", nowhere, "--queue", "q", "--yes"],
        ["submit", nowhere, "x"],
        ["purge", nowhere, "--older-than", "0", "--yes"],
        ["purge", nowhere, "task_0000000000000000000000000", "--yes"],
    ):
        result = subprocess.run(
            [str(SCRIPT), *command, "--read-only"], capture_output=True, text=True, timeout=60
        )
        assert result.returncode == 1, result.stderr
        assert "refused" in result.stderr and "--read-only" in result.stderr
    # Nor is a SQLite file looked at: a missing one is not even noticed.
    missing = str(tmp_path / "absent.db")
    refused = subprocess.run(
        [str(SCRIPT), "submit", missing, "x", "--read-only"], capture_output=True, text=True
    )
    assert refused.returncode == 1 and "refused" in refused.stderr
    assert not (tmp_path / "absent.db").exists()
    config = tmp_path / "config.toml"
    config.write_text(
        f'[targets.ro]\ndsn = "{nowhere}"\nread_only = true\n'
        f'[targets.prod]\npath = "{tmp_path / "prod.db"}"\ndanger = true\n'
    )
    ro = subprocess.run(
        [str(SCRIPT), "retry", "ro", "--status", "failed", "--yes", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ro.returncode == 1 and "read_only" in ro.stderr
    asyncio.run(_make_db(tmp_path / "prod.db"))
    gated = subprocess.run(
        [str(SCRIPT), "submit", "prod", "x", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert gated.returncode == 1 and "--confirm-target prod" in gated.stderr
    wrong = subprocess.run(
        [
            str(SCRIPT),
            "submit",
            "prod",
            "x",
            "--config",
            str(config),
            "--confirm-target",
            "staging",
        ],
        capture_output=True,
        text=True,
    )
    assert wrong.returncode == 1
    ok = subprocess.run(
        [str(SCRIPT), "submit", "prod", "x", "--config", str(config), "--confirm-target", "prod"],
        capture_output=True,
        text=True,
    )
    assert ok.returncode == 0, ok.stderr
    import sqlite3

    with sqlite3.connect(tmp_path / "prod.db") as db:
        assert db.execute("select count(*) from cairnq_tasks").fetchone() == (1,)
    # A dry run writes nothing, so it needs no confirmation; reads need none either.
    dry = subprocess.run(
        [str(SCRIPT), "cancel", "prod", "--queue", "default", "--dry-run", "--config", str(config)],
        capture_output=True,
        text=True,
    )
    assert dry.returncode == 0 and "1 live task(s) to cancel" in dry.stdout
    gate = [str(SCRIPT), "purge", "prod", "task_x", "--yes", "--config", str(config)]
    purged = subprocess.run(gate, capture_output=True, text=True)
    assert purged.returncode == 1 and "--confirm-target prod" in purged.stderr


async def _make_db(path: Path) -> None:
    import cairnq

    store = cairnq.SQLiteStore(str(path))
    await store.connect()
    await store.close()


def test_missing_targets_are_bad_input(tmp_path: Path) -> None:
    for command in ("tasks", "stats", "doctor"):
        result = subprocess.run(
            [str(SCRIPT), command, str(tmp_path / "none.db")], capture_output=True, text=True
        )
        assert result.returncode == 2
        assert result.stderr.startswith("cairnq-tui: no cairnq database at")
        assert not (tmp_path / "none.db").exists()


@pytest.mark.parametrize(
    "command",
    ["tasks", "show", "submit", "cancel", "retry", "purge", "stats", "failures", "doctor"],
)
def test_every_command_has_help_with_an_example(command: str) -> None:
    result = subprocess.run([str(SCRIPT), command, "--help"], capture_output=True, text=True)
    assert result.returncode == 0
    assert "example:" in result.stdout and f"cairnq-tui {command} " in result.stdout


async def _terminal_tasks(path: Path, count: int) -> None:
    import cairnq

    store = cairnq.SQLiteStore(str(path))
    await store.connect()
    try:
        for i in range(count):
            await store.submit(name="old", payload={"i": i})
    finally:
        await store.close()
    import sqlite3

    with sqlite3.connect(path) as db:
        db.execute("update cairnq_tasks set status = 'succeeded', completed_at_ms = created_at_ms")


def _run_with_terminal_stderr(command: list[str]) -> tuple[int, str]:
    import os
    import pty

    leader, follower = pty.openpty()
    try:
        done = subprocess.run(command, stdout=subprocess.PIPE, stderr=follower, timeout=120)
    finally:
        os.close(follower)
    seen = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # EIO: the follower side is closed and drained
            break
        if not chunk:
            break
        seen += chunk
    os.close(leader)
    return done.returncode, seen.decode(errors="replace")


def test_a_long_purge_shows_progress_only_on_a_terminal(tmp_path: Path) -> None:
    path = tmp_path / "big.db"
    asyncio.run(_terminal_tasks(path, 1_500))
    command = [str(SCRIPT), "purge", str(path), "--older-than", "0", "--yes"]
    quiet = subprocess.run([*command, "--limit", "600"], capture_output=True, text=True)
    assert quiet.returncode == 0 and "Purged 600 task(s)." in quiet.stdout
    assert quiet.stderr == ""  # not a terminal: no progress line
    status, stderr = _run_with_terminal_stderr([*command, "--limit", "10000"])
    assert status == 0
    assert "purged 900 of 900" in stderr or "purged 900" in stderr, stderr
    assert "\r" in stderr


def test_a_password_never_reaches_the_output() -> None:
    secret = "s3cret-pw"
    where = f"postgresql://ops:{secret}@127.0.0.1:1/app"
    for command, status in (("tasks", 2), ("stats", 2), ("doctor", 1)):
        result = subprocess.run(
            [str(SCRIPT), command, where], capture_output=True, text=True, timeout=60
        )
        assert result.returncode == status, (command, result.stderr)
        assert secret not in result.stdout + result.stderr
        assert "127.0.0.1" in result.stdout + result.stderr  # it still says where
