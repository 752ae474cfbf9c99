"""``doctor``: one line per check, OK / WARN / FAIL, with what to do about it.

It writes nothing: the target is opened read-only and SQLite files are read
through read-only connections. The schema is judged against the migration list
and the index list the engine keeps (``engine.health`` reads them from
``engine._sql.migrations`` and ``engine.store._schema_check``); leases and
backlogs through the console's ``Inspector`` reads.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import asdict, dataclass
from typing import Any

from cairnq_tui.formatting import duration
from cairnq_tui.ops._common import (
    EXIT_FAILED,
    EXIT_OK,
    BadInput,
    add_target_arguments,
    duration_arg,
    emit_json,
    opened,
    resolve_target,
)
from cairnq_tui.target import make_store
from engine import health
from engine.inspection import Inspector

CLOCK_SKEW_WARN_MS = 1_000
WAL_WARN_BYTES = 256 * 2**20
DISK_WARN_BYTES = 2**30
DISK_FAIL_BYTES = 100 * 2**20


@dataclass(frozen=True)
class Check:
    check: str
    status: str  # OK, WARN or FAIL
    detail: str
    advice: str = ""


def add_parser(commands: Any, example: str) -> None:
    parser = commands.add_parser(
        "doctor",
        help="health checks: schema, migrations, indexes, durability, clock, leases, backlog",
        description="Check TARGET and print one line per check: OK, WARN or FAIL, with what "
        "to do. Exit status 0 without a FAIL, 1 with one. Writes nothing.",
        epilog=example,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_target_arguments(parser)
    parser.add_argument(
        "--stale",
        type=duration_arg,
        default=300_000,
        metavar="AGE",
        help="a due queued task waiting longer than AGE with no worker claiming is a WARN "
        "(default 5m)",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per check")


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def schema_checks(found: health.SchemaHealth, meta: dict[str, str] | None) -> list[Check]:
    out: list[Check] = []
    writer = "open it once with a writer (cairnq-tui launch TARGET, or any cairnq worker)"
    latest = str(int(found.known[-1][:4]))
    if meta is not None:
        protocol = meta.get("protocol_version")
        out.append(
            Check("protocol", "OK", "protocol_version 1")
            if protocol == "1"
            else Check(
                "protocol",
                "FAIL",
                f"protocol_version {protocol!r}, this tool speaks 1",
                "use the cairnq-tui release that speaks this protocol",
            )
        )
        version = meta.get("schema_version")
        if version == latest:
            out.append(Check("schema version", "OK", f"schema_version {version}"))
        elif version is not None and version.isdigit() and int(version) > int(latest):
            out.append(
                Check("schema version", "OK", f"schema_version {version} (newer than {latest})")
            )
        else:
            out.append(
                Check(
                    "schema version",
                    "WARN",
                    f"schema_version {version!r}, the latest migration sets {latest}",
                    writer + " to migrate it",
                )
            )
    if found.missing:
        out.append(
            Check(
                "migrations",
                "FAIL",
                f"{len(found.missing)} of {len(found.known)} missing from cairnq_migrations: "
                + ", ".join(found.missing),
                writer + " to apply them",
            )
        )
    else:
        extra = f"; {len(found.unknown)} more from a newer SDK" if found.unknown else ""
        out.append(Check("migrations", "OK", f"all {len(found.known)} applied{extra}"))
    index_problems = [p for p in found.problems if "index" in p]
    other = [p for p in found.problems if "index" not in p]
    out.append(
        Check(
            "indexes",
            "FAIL",
            "; ".join(index_problems),
            "apply the missing migrations; recreate an altered index as PROTOCOL.md §1.6 "
            "defines it",
        )
        if index_problems
        else Check("indexes", "OK", "every protocol index present, in its final shape")
    )
    if other:
        out.append(
            Check(
                "tables",
                "FAIL",
                "; ".join(other),
                "restore the protocol's tables (a column or trigger was changed by hand)",
            )
        )
    return out


def sqlite_checks(path: str) -> list[Check]:
    f = health.sqlite_file_health(path)
    out = [
        Check("journal mode", "OK", "WAL")
        if f.journal_mode == "wal"
        else Check(
            "journal mode",
            "WARN",
            f"{f.journal_mode}, not WAL: readers and the writer block each other",
            "open it once with a cairnq writer (it switches to WAL), or run "
            "sqlite3 FILE 'pragma journal_mode=wal' while nothing else has it open",
        )
    ]
    wal = f"WAL file {_size(f.wal_bytes)}, database {_size(f.db_bytes)}"
    out.append(
        Check(
            "wal size",
            "WARN",
            wal,
            "a long-lived reader may be holding back checkpoints; close idle consoles",
        )
        if f.wal_bytes > WAL_WARN_BYTES
        else Check("wal size", "OK", wal)
    )
    names = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
    level = names.get(f.synchronous, str(f.synchronous))
    note = "a new connection's default; cairnq-tui writes with FULL unless --synchronous normal"
    out.append(
        Check("synchronous", "OK", f"{level} ({note})")
        if f.synchronous >= 1
        else Check(
            "synchronous",
            "WARN",
            f"{level} ({note})",
            "SQLite was built with synchronous OFF: commits can be lost on a crash",
        )
    )
    free = f"{_size(f.disk_free_bytes)} free of {_size(f.disk_total_bytes)}"
    if f.disk_free_bytes < DISK_FAIL_BYTES:
        out.append(Check("free disk", "FAIL", free, "free space now: writes will fail"))
    elif f.disk_free_bytes < DISK_WARN_BYTES or f.disk_free_bytes < f.disk_total_bytes * 0.05:
        out.append(Check("free disk", "WARN", free, "purge old tasks or free space"))
    else:
        out.append(Check("free disk", "OK", free))
    return out


def server_checks(server: health.ServerHealth) -> list[Check]:
    out: list[Check] = []
    skew = server.skew_ms
    slack = server.round_trip_ms // 2
    clock = (
        f"server clock {'+' if skew >= 0 else '-'}{duration(abs(skew))} from this host's "
        f"(round trip {duration(server.round_trip_ms)})"
    )
    out.append(
        Check(
            "clock",
            "WARN",
            clock,
            "leases and delays are stamped with the server's clock; sync both hosts (NTP)",
        )
        if abs(skew) - slack > CLOCK_SKEW_WARN_MS
        else Check("clock", "OK", clock)
    )
    if server.fsync != "on":
        out.append(Check("synchronous", "FAIL", f"fsync = {server.fsync}", "turn fsync on"))
    elif server.synchronous_commit == "off":
        out.append(
            Check(
                "synchronous",
                "WARN",
                "synchronous_commit = off: a server crash can drop acknowledged commits",
                "set synchronous_commit = on for the database or role",
            )
        )
    else:
        out.append(Check("synchronous", "OK", f"synchronous_commit = {server.synchronous_commit}"))
    out.append(
        Check(
            "free disk",
            "OK",
            f"database {_size(server.db_bytes)} (the server's free disk is not visible "
            "to a client)",
        )
    )
    return out


async def activity_checks(inspector: Inspector, stale_ms: int) -> list[Check]:
    """Leases and backlogs, from the console's Workers and Queues reads."""
    now = inspector.clock()
    workers = await inspector.workers()
    # A worker whose every lease ran out is gone: its tasks wait for recovery. One
    # that still renews others is alive, and the expired ones ran past their lease.
    gone = [w for w in workers if w.stopped_heartbeating]
    alive = [w for w in workers if w.expired_task_ids and not w.stopped_heartbeating]
    out: list[Check] = []
    if gone:
        waiting = sum(len(w.expired_task_ids) for w in gone)
        oldest = -min(w.shortest_lease_left_ms for w in gone)
        queues = ", ".join(sorted({q for w in gone for q in w.queues}))
        out.append(
            Check(
                "expired leases",
                "WARN",
                f"{waiting} running task(s) whose lease expired (oldest {duration(oldest)} "
                f"ago; queues {queues}) wait for recovery",
                "any cairnq worker recovers every expired lease when it next claims: start one",
            )
        )
    else:
        out.append(Check("expired leases", "OK", "none waiting for recovery"))
    if alive:
        stuck = sum(len(w.expired_task_ids) for w in alive)
        names = ", ".join(sorted(str(w.worker_id) for w in alive))
        out.append(
            Check(
                "past their lease",
                "WARN",
                f"{stuck} task(s) still running past their lease while their worker "
                f"({names}) renews its others: their heartbeats stopped",
                "look for a stuck or blocking handler in that worker; the task runs again "
                "after recovery",
            )
        )
    else:
        out.append(Check("past their lease", "OK", "no task runs past its lease"))
    busy = {q for w in workers if len(w.expired_task_ids) < w.tasks for q in w.queues}
    latency = await inspector.queue_latency()
    recent = await inspector.recent_finished(window_ms=max(stale_ms, 1))
    stalled = []
    for queue, due in sorted(latency.items()):
        if due.oldest_due_ms is None or now - due.oldest_due_ms < stale_ms:
            continue
        if queue in busy or any(recent.get(queue, {}).values()):
            continue
        stalled.append(f"{queue} (oldest due {duration(now - due.oldest_due_ms)} ago)")
    if stalled:
        out.append(
            Check(
                "unclaimed queues",
                "WARN",
                "due tasks nobody claims: " + ", ".join(stalled),
                "start a worker for these queues (or check its queue and name filters)",
            )
        )
    else:
        out.append(
            Check(
                "unclaimed queues",
                "OK",
                f"no queue has due tasks waiting over {duration(stale_ms)} without a worker",
            )
        )
    return out


async def run(args: argparse.Namespace) -> int:
    target, _, _ = resolve_target(args)  # bad input (exit 2) before any check
    checks: list[Check] = []
    try:
        async with opened(args) as found:
            server = await health.server_health(found.store)
            if server is not None:
                skew = server.skew_ms
                found.inspector.clock = lambda: (
                    int(time.time() * 1000) + skew
                )  # the clock leases use
            schema = await health.schema_health(
                found.store, sqlite_path=None if target.is_postgres else target.raw
            )
            checks += schema_checks(schema, await found.inspector.meta())
            checks += server_checks(server) if server is not None else sqlite_checks(target.raw)
            checks += await activity_checks(found.inspector, args.stale)
    except BadInput as exc:
        checks.append(Check("open", "FAIL", str(exc), "see the reason; doctor writes nothing"))
        try:
            store = make_store(target, read_only=True)
            path = None if target.is_postgres else target.raw
            checks += schema_checks(await health.schema_health(store, sqlite_path=path), None)
            if path is not None:
                checks += sqlite_checks(path)
        except Exception:  # not a database, or no server: the open line says why
            pass
    for check in checks:
        if args.json:
            emit_json(asdict(check))
        else:
            advice = f" -> {check.advice}" if check.advice and check.status != "OK" else ""
            print(f"{check.status:<4}  {check.check}: {check.detail}{advice}")
    failed = any(c.status == "FAIL" for c in checks)
    return EXIT_FAILED if failed else EXIT_OK
