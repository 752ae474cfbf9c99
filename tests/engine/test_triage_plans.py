"""Query plans of the triage reads: error columns, error search, failure groups,
metrics and the sorted lists read the index meant for them, on both dialects,
and never scan the whole tasks table (the protocol's indexes only; the engine
adds none).

SQLite: ``EXPLAIN QUERY PLAN`` on a file the store built and analysed; the
statement as written (``read_statement`` runs the file unchanged), with the
filters given a value and the others NULL.
Postgres: ``EXPLAIN (format json)`` of the text as written with the values bound,
as the store runs it (unprepared, planned per call with its values), with real
statistics (sequential scans allowed) on a table shaped like a busy queue's: mostly
succeeded, a tenth failed, a few live. There Postgres may walk the plain
completion index for a failed-only read (completion time and heap order go
together); either completion index keeps the walk inside the window.
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlite_branches import running_branch

from engine import PostgresStore, SQLiteStore
from engine._sql import parameters, statement

PK = {"sqlite_autoindex_cairnq_tasks_1", "cairnq_tasks_pkey"}
STATUS_COMPLETED = {"cairnq_tasks_status_completed_idx"}
COMPLETION = {
    "cairnq_tasks_completed_idx",
    "cairnq_tasks_status_completed_idx",
    "cairnq_tasks_queue_completed_idx",
}
OPTIONAL = ("status", "queue", "name")

# (statement, filters given a value, indexes any of which must serve the read,
#  whether a sort of the rows read is allowed (bounded by a window / LIMIT))
SHAPES: list[tuple[str, frozenset[str], set[str], bool]] = [
    ("inspect_task_errors", frozenset(), PK, False),
    ("inspect_tasks_by_ids", frozenset(), PK, True),
    ("purge_ids", frozenset(), PK, False),
    ("inspect_failures_floor", frozenset(), STATUS_COMPLETED, False),
    ("inspect_failures_span", frozenset(), STATUS_COMPLETED, False),
    ("inspect_failure_groups", frozenset(), STATUS_COMPLETED, True),
    ("inspect_failure_group_members", frozenset({"name"}), STATUS_COMPLETED, True),
    ("inspect_metrics_throughput", frozenset(), COMPLETION, True),
    ("inspect_metrics_latency", frozenset(), COMPLETION, True),
    ("inspect_metrics_totals", frozenset(), STATUS_COMPLETED, True),
    ("inspect_metrics_sample_throughput", frozenset(), COMPLETION, True),
    ("inspect_metrics_sample_latency", frozenset(), COMPLETION, True),
    ("inspect_errors_retrying", frozenset(), STATUS_COMPLETED | {"cairnq_tasks_claim_idx"}, True),
    # the recorder's per-(queue, name, status) counts: skip scans of the claim index
    ("inspect_name_counts", frozenset(), {"cairnq_tasks_claim_name_idx"}, True),
    *[
        (f"inspect_errors_failed_{way}", active, STATUS_COMPLETED, False)
        for way in ("older", "newer")
        for active in (frozenset(), frozenset({"queue"}), frozenset({"name"}))
    ],
    *[
        (f"inspect_sorted_completed_{way}", active, COMPLETION, False)
        for way in ("older", "newer")
        for active in (
            frozenset(),
            frozenset({"status"}),
            frozenset({"queue"}),
            frozenset({"name"}),
            frozenset({"status", "queue"}),
        )
    ],
    # No protocol index orders by due or updated time: a window of the newest
    # matching ids (a primary-key walk under a LIMIT) is sorted.
    *[
        (f"inspect_sorted_{what}_{way}", active, PK, True)
        for what in ("due", "updated")
        for way in ("older", "newer")
        for active in (frozenset(), frozenset({"status"}), frozenset({"queue", "name"}))
    ],
]
IDS = [f"{name}[{'+'.join(sorted(active)) or '-'}]" for name, active, _, _ in SHAPES]


def _values(sql: str, active: frozenset[str], dialect: str, rows: int = 600) -> dict[str, Any]:
    """A value for every parameter: a first page over a window of the newest rows."""
    out: dict[str, Any] = {}
    for name in parameters(sql):
        if name in OPTIONAL:
            out[name] = (
                {"status": "failed", "queue": "q0", "name": "n1"}[name] if name in active else None
            )
        elif name == "ids":
            out[name] = ["task_1", "task_2"] if dialect == "postgres" else '["task_1", "task_2"]'
        elif name in ("text", "raw_text", "error_type"):
            out[name] = "boom"
        elif name == "cursor_id":
            out[name] = "task_z"
        elif name in ("limit", "scan_limit", "cap", "skip", "names"):
            out[name] = 50
        elif name == "to_ms":
            out[name] = 10**13
        elif name == "cursor_ms":
            # past every row in the walk's direction: a first page
            out[name] = (
                -(10**13)
                if re.search(r"completed_at_ms >= :cursor_ms|> :cursor_ms", sql)
                else 10**13
            )
        elif name == "live":
            out[name] = 0
        elif name == "bucket_ms":
            out[name] = 60_000
        else:
            out[name] = rows * 4 // 5  # the window's start: the newest fifth of the rows
    return out


# -- SQLite -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sqlite_db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[sqlite3.Connection]:
    path = tmp_path_factory.mktemp("triage-plans") / "plans.db"

    async def build() -> None:
        store = SQLiteStore(path)
        await store.connect()
        for i in range(600):
            await store.submit(name=f"n{i % 5}", queue=f"q{i % 3}", payload={"i": i})
        claimed = await store.claim(queues=["q0", "q1", "q2"], worker_id="w", limit=300)
        for j, task in enumerate(claimed):
            if j % 2:
                await store.complete(task_id=task.id, worker_id="w")
            else:
                error = {"type": "E", "message": f"boom {j}"}
                await store.fail(task_id=task.id, worker_id="w", error=error, retryable=False)
        await store.close()
        again = SQLiteStore(path)  # a second open takes the planner statistics
        await again.connect()
        await again.close()

    asyncio.run(build())
    conn = sqlite3.connect(path)
    yield conn
    conn.close()


def _sqlite_values(sql: str, active: frozenset[str]) -> dict[str, Any]:
    """``_values``, with the id and key bounds and the purge's time as SQLite reads
    them: a value when the shape gives one, else NULL (open)."""
    values = _values(sql, active, "sqlite")
    bounds = {"id_from": "task_0", "id_to": "task_1", "after_id": "task_0", "before_id": "task_1"}
    for name, value in bounds.items():
        if name in values:
            values[name] = value if name in active else None
    if "before_ms" in values:
        values["before_ms"] = 10**13
    return values


def _sqlite_plan(conn: sqlite3.Connection, name: str, active: frozenset[str]) -> list[str]:
    """The plan of the statement as written; of a statement written as guarded
    branches, the plan of the one branch that runs for these values."""
    sql = statement("sqlite", name)
    values = _sqlite_values(sql, active)
    branch = running_branch(conn, sql, values)
    rows = conn.execute("explain query plan " + branch, values).fetchall()
    return [str(r[-1]) for r in rows]


@pytest.mark.parametrize(("name", "active", "indexes", "sorts"), SHAPES, ids=IDS)
def test_sqlite_triage_reads_walk_an_index(
    sqlite_db: sqlite3.Connection,
    name: str,
    active: frozenset[str],
    indexes: set[str],
    sorts: bool,
) -> None:
    plan = _sqlite_plan(sqlite_db, name, active)
    reads = [s for s in plan if re.match(r"(SCAN|SEARCH) cairnq_tasks\b", s)]
    assert reads, plan
    assert not [s for s in reads if s.startswith("SCAN") and "INDEX" not in s], plan
    assert any(
        any(f"INDEX {ix} " in s + " " or f"INDEX {ix}(" in s for ix in indexes) for s in reads
    ), (indexes, plan)
    if not sorts:
        # Only ties of the index's time are ordered by id ("RIGHT PART"): the walk
        # still stops at the LIMIT; a sort of every row read is refused.
        assert not any("TEMP B-TREE FOR ORDER BY" in s for s in plan), plan


CLAIM = {"cairnq_tasks_claim_idx", "cairnq_tasks_claim_name_idx"}
NAME = {"cairnq_tasks_name_idx", "cairnq_tasks_claim_name_idx"}
# SQLite only: the reads written as guarded branches that the shapes above leave out
# (the branch that runs for the filters given must seek one of these indexes).
SQLITE_SHAPES: list[tuple[str, frozenset[str], set[str], bool]] = [
    ("inspect_count_tasks", frozenset(), PK, True),
    ("inspect_count_tasks", frozenset({"status"}), STATUS_COMPLETED | CLAIM, True),
    ("inspect_count_tasks", frozenset({"queue"}), CLAIM, True),
    ("inspect_count_tasks", frozenset({"name"}), NAME, True),
    ("inspect_count_tasks", frozenset({"queue", "status"}), CLAIM, True),
    ("inspect_count_tasks", frozenset({"queue", "status", "name"}), CLAIM, True),
    ("inspect_count_tasks", frozenset({"id_from", "id_to"}), PK, True),
    ("inspect_count_tasks", frozenset({"id_from", "id_to", "status"}), PK, True),
    ("inspect_count_tasks", frozenset({"id_from"}), PK, True),
    ("inspect_count_purgeable", frozenset(), COMPLETION, True),
    ("inspect_count_purgeable", frozenset({"queue"}), {"cairnq_tasks_queue_completed_idx"}, True),
    ("inspect_count_purgeable", frozenset({"status"}), STATUS_COMPLETED, True),
    # the planner picks by its statistics between the name's index and the window
    ("inspect_count_purgeable", frozenset({"name"}), NAME | COMPLETION, True),
    ("inspect_count_purgeable", frozenset({"queue", "status", "name"}), CLAIM | COMPLETION, True),
    *[
        (f"inspect_tasks_sparse_{way}", active, indexes, True)
        for way in ("older", "newer")
        for active, indexes in (
            (frozenset({"status"}), STATUS_COMPLETED | CLAIM),
            (frozenset({"queue"}), CLAIM),
            (frozenset({"name"}), NAME),
            (frozenset({"queue", "status"}), CLAIM),
            (frozenset({"queue", "status", "name"}), CLAIM),
            (frozenset({"id_from", "id_to", "name"}), PK),
            (frozenset({"after_id" if way == "newer" else "before_id"}), PK),
            # a time range's one bound and the cursor: a range of the primary key
            (
                frozenset({"status", "id_to", "after_id"})
                if way == "newer"
                else frozenset({"status", "id_from", "before_id"}),
                PK,
            ),
        )
    ],
    *[
        (f"inspect_{what}_{way}", active, PK, what == "tasks_payload")
        for what in ("tasks", "tasks_payload", "tasks_id_tail")
        for way in ("older", "newer")
        for active in (
            frozenset(),
            frozenset({"after_id" if way == "newer" else "before_id"}),
            frozenset({"id_from", "id_to"}) if what == "tasks" else frozenset({"status"}),
        )
    ],
]
SQLITE_IDS = [f"{name}[{'+'.join(sorted(a)) or '-'}]" for name, a, _, _ in SQLITE_SHAPES]


@pytest.mark.parametrize(("name", "active", "indexes", "sorts"), SQLITE_SHAPES, ids=SQLITE_IDS)
def test_sqlite_guarded_reads_seek_the_index_of_their_filters(
    sqlite_db: sqlite3.Connection,
    name: str,
    active: frozenset[str],
    indexes: set[str],
    sorts: bool,
) -> None:
    """Run as written (no Python edits their text), these reads seek an index of
    the filters given: the guarded branch that runs, or the id range that stays
    a range of the primary key when its bounds are open."""
    test_sqlite_triage_reads_walk_an_index(sqlite_db, name, active, indexes, sorts)


def test_sqlite_plan_check_catches_a_full_scan(tmp_path: Path) -> None:
    """The assertion above fails on a statement that scans the table."""
    conn = sqlite3.connect(tmp_path / "bare.db")
    conn.execute("create table cairnq_tasks (id text primary key, error text)")
    plan = [
        str(r[-1])
        for r in conn.execute(
            "explain query plan select id from cairnq_tasks where instr(error, 'x') > 0"
        )
    ]
    reads = [s for s in plan if re.match(r"(SCAN|SEARCH) cairnq_tasks\b", s)]
    assert [s for s in reads if s.startswith("SCAN") and "INDEX" not in s]


# -- Postgres ---------------------------------------------------------------------------


PG_ROWS = 60_000


@pytest.fixture(scope="module")
def pg_plan() -> Iterator[Any]:
    """One filled, analysed schema for the module (filling it per test cost minutes)."""
    import uuid

    import psycopg
    from pg_support import pg_dsn_or_skip

    dsn = pg_dsn_or_skip()
    schema = f"t_{uuid.uuid4().hex[:12]}"

    async def create() -> None:
        store = PostgresStore(dsn, schema=schema, max_size=1)
        await store.connect()
        await store.close()

    asyncio.run(create())
    conn = psycopg.connect(dsn, autocommit=True)
    conn.execute(f'set search_path to "{schema}"')
    conn.execute(
        f"""
        insert into cairnq_tasks (id, name, queue, status, payload, error, run_at_ms,
                                  created_at_ms, updated_at_ms, completed_at_ms,
                                  worker_id, lease_until_ms)
        select 'task_' || lpad(g::text, 8, '0'), 'n' || (g % 20), 'q' || (g % 3),
               case when g % 10 = 0 then 'failed' when g % 50 = 1 then 'queued'
                    when g % 50 = 2 then 'running' else 'succeeded' end,
               '{{}}'::jsonb,
               case when g % 10 = 0 or g % 150 = 1 then
                   jsonb_build_object('type', 'E', 'message', 'boom ' || (g % 50)) end,
               g, g, g,
               case when g % 50 not in (1, 2) then g end,
               case when g % 50 = 2 then 'w' end,
               case when g % 50 = 2 then g + 1000 end
        from generate_series(1, {PG_ROWS}) as g
        """
    )
    conn.execute("analyze cairnq_tasks")

    def plan(name: str, active: frozenset[str]) -> list[dict[str, Any]]:
        # The text as written, planned with the values bound (server-side), as
        # the store runs it: unprepared, each call planned with its values.
        text = statement("postgres", name)
        values = _values(text, active, "postgres", rows=PG_ROWS)
        row = conn.execute("explain (format json) " + text, values).fetchone()
        assert row is not None
        nodes: list[dict[str, Any]] = []
        stack = [row[0][0]["Plan"]]
        while stack:
            node = stack.pop()
            nodes.append(node)
            stack.extend(node.get("Plans", []))
        return nodes

    try:
        yield plan
    finally:
        conn.execute(f'drop schema if exists "{schema}" cascade')
        conn.close()


@pytest.mark.postgres
@pytest.mark.parametrize(("name", "active", "indexes", "sorts"), SHAPES, ids=IDS)
def test_postgres_triage_reads_walk_an_index(
    pg_plan: Any, name: str, active: frozenset[str], indexes: set[str], sorts: bool
) -> None:
    nodes = pg_plan(name, active)
    seq = [
        n
        for n in nodes
        if n["Node Type"] == "Seq Scan" and n.get("Relation Name") == "cairnq_tasks"
    ]
    assert not seq, f"sequential scan of cairnq_tasks: {nodes}"
    used = {n.get("Index Name") for n in nodes}
    if indexes == STATUS_COMPLETED and name != "inspect_failures_floor":
        indexes = COMPLETION  # see the module's docstring
    assert used & indexes, (indexes, used)
    # An incremental sort orders ties of the index's time by id as the walk goes.
    # A full sort is accepted only over rows an index condition bounded by time
    # (the window): Postgres may combine the name index with the window's range
    # and sort the few matches.
    if not sorts and any(n["Node Type"] == "Sort" for n in nodes):
        conds = " ".join(str(n.get("Index Cond", "")) for n in nodes)
        assert "completed_at_ms >=" in conds, nodes
