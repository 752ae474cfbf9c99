"""The claimable probe on both dialects: the same answer as its definition (PROTOCOL.md §4.11)
over many table shapes, and work that does not grow with the queued rows it
must step over.

The claim indexes put priority before due time, so a probe that filters on
``run_at_ms`` under a ``(queue, status)`` seek walks every queued row of the
queue when none is due (250k delayed rows: ~22 ms per idle poll). The work is
counted in SQLite virtual-machine steps (``set_progress_handler``), which is
deterministic for a given file and plan: no timing.
"""

from __future__ import annotations

import asyncio
import json
import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from engine import SQLiteStore
from engine._sql import statement

NOW = 1_700_000_000_000
QUEUES = ("a", "b", "c")
NAMES = ("x", "y", "z")
PRIORITIES = (-5, 0, 3, 10)

_INSERT = """
insert into cairnq_tasks (id, name, queue, status, payload, metadata, attempt,
    max_attempts, priority, worker_id, run_at_ms, created_at_ms, updated_at_ms,
    lease_until_ms)
values (:id, :name, :queue, :status, '{}', '{}', 0, 3, :priority, :worker_id,
    :run_at_ms, 0, 0, :lease_until_ms)
"""


def _new_file(path: Path) -> sqlite3.Connection:
    async def migrate() -> None:
        store = SQLiteStore(path)
        await store.connect()
        await store.close()

    asyncio.run(migrate())
    return sqlite3.connect(path, isolation_level=None)


def _row(i: int, **values: Any) -> dict[str, Any]:
    row = {
        "id": f"task_{i:026d}",
        "name": "x",
        "queue": "a",
        "status": "queued",
        "priority": 0,
        "worker_id": None,
        "run_at_ms": NOW - 1,
        "lease_until_ms": None,
    }
    row.update(values)
    return row


def _probe(conn: sqlite3.Connection, queues: list[str], names: list[str] | None) -> bool:
    params = {
        "queues": json.dumps(queues),
        "names": None if names is None else json.dumps(names),
        "now_ms": NOW,
    }
    return bool(conn.execute(statement("sqlite", "claimable_probe"), params).fetchone()[0])


def _expected(rows: list[dict[str, Any]], queues: list[str], names: list[str] | None) -> bool:
    return _expected_at(rows, queues, names, NOW)


def _random_rows(rng: random.Random, count: int) -> list[dict[str, Any]]:
    rows = []
    for i in range(count):
        status = rng.choice(("queued", "queued", "queued", "running", "succeeded"))
        running = status == "running"
        rows.append(
            _row(
                i,
                name=rng.choice(NAMES),
                queue=rng.choice(QUEUES),
                status=status,
                priority=rng.choice(PRIORITIES),
                worker_id="w" if running else None,
                # mostly undue, so the answer often hangs on one row; `NOW` itself is due
                run_at_ms=NOW + rng.choice((-1000, 0, 1, 5000, 86_400_000, 86_400_000)),
                # an expired lease is rare: otherwise it answers every probe
                lease_until_ms=(NOW + rng.choice((-1, 1000, 60_000, 60_000))) if running else None,
            )
        )
    return rows


def _probe_shapes() -> list[tuple[list[str], list[str] | None]]:
    queue_sets = [["a"], ["b"], ["a", "c"], ["a", "b", "c"], ["nope"], []]
    name_sets: list[list[str] | None] = [None, ["x"], ["y", "z"], ["x", "nope"], []]
    return [(q, n) for q in queue_sets for n in name_sets]


@pytest.mark.parametrize("seed", range(12))
def test_probe_answers_as_defined_over_mixed_shapes(tmp_path: Path, seed: int) -> None:
    """Due, undue and delayed rows over several queues, names and priorities, with
    and without an expired lease: for every queue/name filter the probe says
    what §4.11 says, as the table grows from empty one row at a time."""
    rng = random.Random(seed)
    rows = _random_rows(rng, 40)
    conn = _new_file(tmp_path / "probe.db")
    try:
        present: list[dict[str, Any]] = []
        for row in rows:
            conn.execute(_INSERT, row)
            present.append(row)
            for queues, names in _probe_shapes():
                assert _probe(conn, queues, names) == _expected(present, queues, names), (
                    queues,
                    names,
                    present,
                )
    finally:
        conn.close()


def test_probe_finds_a_due_row_below_undue_higher_priorities(tmp_path: Path) -> None:
    """Only the lowest priority has a due row, under higher priorities holding
    undue rows only: found, by queue and by name."""
    conn = _new_file(tmp_path / "probe.db")
    try:
        i = 0
        for priority in (100, 50, 7, 1, 0):
            for _ in range(3):
                conn.execute(_INSERT, _row(i, priority=priority, run_at_ms=NOW + 60_000))
                i += 1
        assert not _probe(conn, ["a"], None)
        assert not _probe(conn, ["a"], ["x"])
        conn.execute(_INSERT, _row(i, priority=-3, run_at_ms=NOW))
        assert _probe(conn, ["a"], None)
        assert _probe(conn, ["a"], ["x"])
        assert not _probe(conn, ["a"], ["y"])
        assert not _probe(conn, ["b"], None)
    finally:
        conn.close()


def _steps(conn: sqlite3.Connection, queues: list[str], names: list[str] | None) -> int:
    count = 0

    def tick() -> int:
        nonlocal count
        count += 1
        return 0

    conn.set_progress_handler(tick, 1)
    try:
        assert not _probe(conn, queues, names)
    finally:
        conn.set_progress_handler(None, 1)
    return count


def _delayed_file(path: Path, delayed: int) -> sqlite3.Connection:
    """``delayed`` undue rows in queue ``a`` over three priorities and two names
    (none due), a few due rows on another queue, and statistics as the store
    keeps them."""
    conn = _new_file(path)
    conn.execute("begin")
    for i in range(delayed):
        conn.execute(
            _INSERT,
            _row(i, priority=(0, 5, 9)[i % 3], name=("x", "y")[i % 2], run_at_ms=NOW + 86_400_000),
        )
    for i in range(delayed, delayed + 5):
        conn.execute(_INSERT, _row(i, queue="b"))
    conn.execute("commit")
    conn.execute("analyze")
    return conn


@pytest.mark.parametrize("names", [None, ["x"], ["x", "y"]], ids=["any-name", "one", "two"])
def test_probe_work_does_not_grow_with_delayed_rows(
    tmp_path: Path, names: list[str] | None
) -> None:
    """An idle worker's probe over a queue of delayed rows: the same number of VM
    steps with 60 delayed rows as with 6,000 (a walk over them would take
    100 times as many)."""
    small = _delayed_file(tmp_path / "small.db", 60)
    large = _delayed_file(tmp_path / "large.db", 6_000)
    try:
        few, many = _steps(small, ["a"], names), _steps(large, ["a"], names)
    finally:
        small.close()
        large.close()
    assert many <= few + 50, (few, many)


# -- Postgres -----------------------------------------------------------------------
# The database clock decides what is due there, so rows sit at least a minute
# either side of it.

_PG_INSERT = """
insert into cairnq_tasks (id, name, queue, status, payload, metadata, attempt,
    max_attempts, priority, worker_id, run_at_ms, created_at_ms, updated_at_ms,
    lease_until_ms)
values (%(id)s, %(name)s, %(queue)s, %(status)s, '{}', '{}', 0, 3, %(priority)s,
    %(worker_id)s, %(run_at_ms)s, 0, 0, %(lease_until_ms)s)
"""


def _pg_probe(conn: Any, queues: list[str], names: list[str] | None) -> bool:
    from engine.store.postgres import _sql

    row = conn.execute(_sql("claimable_probe"), {"queues": queues, "names": names}).fetchone()
    return bool(row[0])


def _shift(rows: list[dict[str, Any]], now: int) -> list[dict[str, Any]]:
    """``rows`` around ``now`` instead of ``NOW``, every offset stretched to a minute
    or more (the clock moves while the test runs)."""

    def at(value: int | None) -> int | None:
        if value is None:
            return None
        offset = value - NOW
        return now + (60_000 if offset > 0 else -60_000) + offset * 10

    return [
        dict(r, run_at_ms=at(r["run_at_ms"]), lease_until_ms=at(r["lease_until_ms"])) for r in rows
    ]


@pytest.mark.postgres
@pytest.mark.parametrize("seed", range(4))
async def test_postgres_probe_answers_as_defined_over_mixed_shapes(
    pg_store: Any, pg_dsn: str, pg_schema: str, seed: int
) -> None:
    import time

    import psycopg

    rng = random.Random(seed)
    now = int(time.time() * 1000)
    rows = _shift(_random_rows(rng, 40), now)
    with psycopg.connect(pg_dsn, autocommit=True, options=f"-c search_path={pg_schema}") as conn:
        present: list[dict[str, Any]] = []
        for i, row in enumerate(rows):
            conn.execute(_PG_INSERT, row)
            present.append(row)
            if i % 4 != 3:
                continue
            for queues, names in _probe_shapes():
                want = _expected_at(present, queues, names, now)
                assert _pg_probe(conn, queues, names) == want, (queues, names, present)


def _expected_at(
    rows: list[dict[str, Any]], queues: list[str], names: list[str] | None, now: int
) -> bool:
    due = any(
        r["status"] == "queued"
        and r["queue"] in queues
        and (names is None or r["name"] in names)
        and r["run_at_ms"] <= now
        for r in rows
    )
    lease = any(
        r["status"] == "running" and r["lease_until_ms"] is not None and r["lease_until_ms"] <= now
        for r in rows
    )
    return due or lease


def _pg_buffers(conn: Any, queues: list[str], names: list[str] | None) -> int:
    """Shared buffers the probe touched (hits and reads), from EXPLAIN ANALYZE."""
    from engine.store.postgres import _sql

    row = conn.execute(
        "explain (analyze, buffers, format json) " + _sql("claimable_probe"),
        {"queues": queues, "names": names},
    ).fetchone()
    plan = row[0][0]["Plan"]
    assert plan["Actual Rows"] == 1
    return int(plan.get("Shared Hit Blocks", 0)) + int(plan.get("Shared Read Blocks", 0))


@pytest.mark.postgres
@pytest.mark.parametrize("names", [None, ["x"], ["x", "y"]], ids=["any-name", "one", "two"])
async def test_postgres_probe_work_does_not_grow_with_delayed_rows(
    pg_store: Any, pg_dsn: str, pg_schema: str, names: list[str] | None
) -> None:
    """Index pages the probe touches over a queue of 10,000 delayed rows, then of
    40,000 (the same index depth): about the same, where a walk over them reads
    four times as many leaf pages (~150, then ~600)."""
    import psycopg

    fill = """
        insert into cairnq_tasks (id, name, queue, status, payload, metadata, attempt,
            max_attempts, priority, run_at_ms, created_at_ms, updated_at_ms)
        select 'task_' || lpad(g::text, 26, '0'), case when mod(g, 2) = 0 then 'x' else 'y' end,
            'a', 'queued', '{}', '{}', 0, 3, (array[0, 5, 9])[1 + mod(g, 3)],
            (extract(epoch from now()) * 1000)::bigint + 86400000, 0, 0
        from generate_series(%(start)s::int, %(stop)s::int) as g
    """
    with psycopg.connect(pg_dsn, autocommit=True, options=f"-c search_path={pg_schema}") as conn:
        conn.execute(fill, {"start": 1, "stop": 10_000})
        conn.execute("vacuum analyze cairnq_tasks")
        assert not _pg_probe(conn, ["a"], names)
        few = _pg_buffers(conn, ["a"], names)
        conn.execute(fill, {"start": 10_001, "stop": 40_000})
        conn.execute("vacuum analyze cairnq_tasks")
        assert not _pg_probe(conn, ["a"], names)
        many = _pg_buffers(conn, ["a"], names)
    assert many <= few + 20, (few, many)
