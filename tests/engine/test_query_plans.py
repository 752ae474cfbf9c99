"""Query plans: every claim variant, lease recovery, the claimable probe, purge and
each indexed list shape reads the index meant for it, on both dialects, and never
scans the whole tasks table.

SQLite: ``EXPLAIN QUERY PLAN`` on a file the store built and analysed. Postgres:
``EXPLAIN (format json)`` on a few thousand rows after ANALYZE, with sequential
scans priced out (``enable_seqscan = off``), so the assertion is that the index
*can* serve the statement as written, not a guess about small-table costs. A
statement with optional filters is explained as written with its values bound
(the store runs it unprepared: ``_pg_statements.PLANNED_WITH_VALUES``); the
prepared claims' generic plans are checked too, and purge on a larger table with
and without planner statistics.
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlite_branches import branches, guard_parameters, running_branch

from engine import PostgresStore, SQLiteStore
from engine._sql import parameters, sql_root, statement

# (statement, filters given a value, parameters left NULL, indexes any of which
# must serve the tasks table).
CLAIMS = [
    ("claim", {"names": '["n1", "n2"]'}, {"cairnq_tasks_claim_idx", "cairnq_tasks_claim_name_idx"}),
    ("claim", {"names": None}, {"cairnq_tasks_claim_idx", "cairnq_tasks_claim_name_idx"}),
    ("claim_one_name", {}, {"cairnq_tasks_claim_name_idx"}),
    (
        "claim_one_queue",
        {"names": '["n1", "n2"]'},
        {"cairnq_tasks_claim_idx", "cairnq_tasks_claim_name_idx"},
    ),
    ("claim_one_queue", {"names": None}, {"cairnq_tasks_claim_idx", "cairnq_tasks_claim_name_idx"}),
    ("claim_one_queue_one_name", {}, {"cairnq_tasks_claim_name_idx"}),
]
PURGES = [
    (frozenset(), {"cairnq_tasks_completed_idx", "cairnq_tasks_status_completed_idx"}),
    (frozenset({"queue"}), {"cairnq_tasks_queue_completed_idx"}),
    (frozenset({"status"}), {"cairnq_tasks_status_completed_idx"}),
    (frozenset({"name"}), {"cairnq_tasks_completed_idx", "cairnq_tasks_status_completed_idx"}),
    (frozenset({"queue", "status"}), {"cairnq_tasks_queue_completed_idx"}),
    (frozenset({"queue", "status", "name"}), {"cairnq_tasks_queue_completed_idx"}),
]
# Each list filter that has an index of its own; combinations must use one of theirs.
LIST_INDEXES = {
    "status": {"cairnq_tasks_status_completed_idx", "cairnq_tasks_status_idx"},
    "queue": {"cairnq_tasks_claim_idx", "cairnq_tasks_claim_name_idx"},
    "name": {"cairnq_tasks_name_idx", "cairnq_tasks_claim_name_idx"},
    "root_id": {"cairnq_tasks_root_idx"},
}
LIST_SHAPES = [
    frozenset({"status"}),
    frozenset({"queue"}),
    frozenset({"name"}),
    frozenset({"root_id"}),
    frozenset({"queue", "status"}),
    frozenset({"queue", "name"}),
    frozenset({"queue", "status", "name"}),
    frozenset({"root_id", "correlation_id"}),
]
LIST_FILTERS = ("status", "queue", "name", "root_id", "correlation_id")
PURGE_FILTERS = ("queue", "status", "name")
LEASE = {"cairnq_tasks_lease_idx"}
CLAIM_INDEXES = {"cairnq_tasks_claim_idx", "cairnq_tasks_claim_name_idx"}
COMPLETION = {
    "cairnq_tasks_completed_idx",
    "cairnq_tasks_queue_completed_idx",
    "cairnq_tasks_status_completed_idx",
}


def _values(sql: str, given: dict[str, Any]) -> dict[str, Any]:
    """A value for every ``:param`` of ``sql``: ``given`` first, then a plausible one."""
    out: dict[str, Any] = {}
    for name in parameters(sql):
        if name in given:
            out[name] = given[name]
        elif name == "queues":
            out[name] = '["q0", "q1"]'
        elif name == "status":
            out[name] = "succeeded"
        elif name == "lease_expired_error":
            out[name] = '{"type": "LeaseExpired"}'
        elif name.endswith("_ms") or name in ("limit", "offset", "retryable"):
            out[name] = 5
        else:
            out[name] = "q0" if name == "queue" else "n1"
    return out


# -- SQLite -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sqlite_db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[sqlite3.Connection]:
    path = tmp_path_factory.mktemp("plans") / "plans.db"

    async def build() -> None:
        store = SQLiteStore(path)
        await store.connect()
        for i in range(400):
            await store.submit(name=f"n{i % 5}", queue=f"q{i % 3}", payload={"i": i})
        claimed = await store.claim(queues=["q0", "q1"], worker_id="w", limit=80)
        for task in claimed[:40]:
            await store.complete(task_id=task.id, worker_id="w")
        await store.close()
        again = SQLiteStore(path)  # a second open bootstraps the planner statistics
        await again.connect()
        await again.close()

    import asyncio

    asyncio.run(build())
    conn = sqlite3.connect(path)
    yield conn
    conn.close()


def _sqlite_plan(conn: sqlite3.Connection, sql: str, given: dict[str, Any]) -> list[str]:
    rows = conn.execute("explain query plan " + sql, _values(sql, given)).fetchall()
    return [row[-1] for row in rows]


def _sqlite_tasks_access(plan: list[str]) -> list[str]:
    """The plan steps that read cairnq_tasks (by name or by its alias ``t``)."""
    return [step for step in plan if re.match(r"(SCAN|SEARCH) (cairnq_tasks|t)\b", step)]


def _assert_sqlite(plan: list[str], indexes: set[str]) -> None:
    reads = _sqlite_tasks_access(plan)
    assert reads, plan
    full = [s for s in reads if s.startswith("SCAN") and "INDEX" not in s]
    assert not full, f"full scan of cairnq_tasks: {plan}"
    assert any(any(f"INDEX {ix} " in s + " " for ix in indexes) for s in reads), (indexes, plan)


@pytest.mark.parametrize(("name", "given", "indexes"), CLAIMS)
def test_sqlite_claim_variants_seek_the_claim_indexes(
    sqlite_db: sqlite3.Connection, name: str, given: dict[str, Any], indexes: set[str]
) -> None:
    plan = _sqlite_plan(sqlite_db, statement("sqlite", name), given)
    _assert_sqlite(plan, indexes)
    # The candidates are found by index; the UPDATE then touches them by primary key.
    assert any("sqlite_autoindex_cairnq_tasks_1" in s for s in plan), plan


def test_sqlite_recovery_and_probe_read_the_lease_index(sqlite_db: sqlite3.Connection) -> None:
    recover = _sqlite_plan(sqlite_db, statement("sqlite", "recover_leases"), {})
    _assert_sqlite(recover, LEASE)
    probe = _sqlite_plan(sqlite_db, statement("sqlite", "claimable_probe"), {"names": None})
    _assert_sqlite(probe, LEASE)
    _assert_sqlite(probe, CLAIM_INDEXES)


@pytest.mark.parametrize(("active", "indexes"), PURGES)
def test_sqlite_purge_shapes_read_a_completion_index(
    sqlite_db: sqlite3.Connection, active: frozenset[str], indexes: set[str]
) -> None:
    from engine.store._sqlite_operations import purge_statement

    sql = purge_statement(active)
    nulls = {f: None for f in PURGE_FILTERS if f not in active}
    _assert_sqlite(_sqlite_plan(sqlite_db, sql, nulls), indexes)


@pytest.fixture(scope="module")
def sqlite_unanalysed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[sqlite3.Connection]:
    """A file the store built and filled but never analysed (as a new database runs)."""
    path = tmp_path_factory.mktemp("plans") / "unanalysed.db"

    async def build() -> None:
        store = SQLiteStore(path)
        await store.connect()  # statistics are taken now, on empty tables: none
        for i in range(300):
            task = await store.submit(name=f"n{i % 2}", queue=f"q{i % 2}")
            if i % 3:
                await store.cancel(task.id)
        await store.close()

    import asyncio

    asyncio.run(build())
    conn = sqlite3.connect(path)
    assert conn.execute(
        "select count(*) from sqlite_master where name = 'sqlite_stat1'"
    ).fetchone() == (0,) or conn.execute("select count(*) from sqlite_stat1").fetchone() == (0,)
    yield conn
    conn.close()


@pytest.mark.parametrize("analysed", [True, False], ids=["analysed", "no-statistics"])
@pytest.mark.parametrize(("active", "indexes"), PURGES)
def test_sqlite_store_purges_read_candidates_in_completion_order(
    request: pytest.FixtureRequest, analysed: bool, active: frozenset[str], indexes: set[str]
) -> None:
    """The statement the store runs walks a completion index oldest first and stops
    at ``limit``: no sort of every candidate (a temporary B-tree), which made each
    ``purge(limit=100)`` of a backlog cost as much as the whole backlog. Without
    statistics the name and unfiltered shapes used to read ``(name)`` or the three
    statuses of ``(status, completed_at_ms)`` and sort."""
    from engine.store._sqlite_operations import purge_statement

    conn = request.getfixturevalue("sqlite_db" if analysed else "sqlite_unanalysed")
    sql = purge_statement(active)
    nulls = {f: None for f in PURGE_FILTERS if f not in active}
    plan = _sqlite_plan(conn, sql, nulls)
    _assert_sqlite(plan, COMPLETION)
    assert not any("TEMP B-TREE" in step for step in plan), plan


@pytest.mark.parametrize("active", LIST_SHAPES, ids=lambda a: "+".join(sorted(a)))
def test_sqlite_list_shapes_use_a_filter_index(
    sqlite_db: sqlite3.Connection, active: frozenset[str]
) -> None:
    """``list`` runs as written: of its guarded branches, the one that runs for
    these filters seeks an index of one of them."""
    sql = statement("sqlite", "list")
    nulls = {f: None for f in LIST_FILTERS if f not in active}
    branch = running_branch(sqlite_db, sql, _values(sql, nulls))
    wanted = set().union(*(LIST_INDEXES.get(f, set()) for f in active))
    _assert_sqlite(_sqlite_plan(sqlite_db, branch, nulls), wanted)


@pytest.mark.parametrize("size", range(len(LIST_FILTERS) + 1))
def test_sqlite_list_runs_exactly_one_branch_for_every_shape(
    sqlite_db: sqlite3.Connection, size: int
) -> None:
    """Every combination of list filters has exactly one guarded branch, and the
    statement returns what the plain filter returns (newest first)."""
    import itertools

    sql = statement("sqlite", "list")
    for active in itertools.combinations(LIST_FILTERS, size):
        given = {"queue": "q0", "status": "queued", "name": "n1"}
        row = sqlite_db.execute("select root_id, correlation_id from cairnq_tasks").fetchone()
        given.update(root_id=row[0], correlation_id=row[1])
        values = {f: (given[f] if f in active else None) for f in LIST_FILTERS}
        values.update(limit=1000, offset=0)
        running_branch(sqlite_db, sql, values)
        where = " and ".join(f"{f} is :{f}" for f in active) or "1"
        expected = sqlite_db.execute(
            f"select id from cairnq_tasks where {where} order by created_at_ms desc, id desc",
            values,
        ).fetchall()
        got = [(r[0],) for r in sqlite_db.execute(sql, values).fetchall()]
        assert got == expected, active


@pytest.mark.parametrize("queue", [None, "q0"])
def test_sqlite_stats_reads_the_claim_index(
    sqlite_db: sqlite3.Connection, queue: str | None
) -> None:
    """``stats`` as written: with a queue its branch seeks the claim index on it;
    without, the other branch walks the whole (covering) index."""
    sql = statement("sqlite", "stats")
    branch = running_branch(sqlite_db, sql, {"queue": queue})
    plan = _sqlite_plan(sqlite_db, branch, {"queue": queue})
    _assert_sqlite(plan, CLAIM_INDEXES)
    if queue is not None:
        assert any(s.startswith("SEARCH") and "(queue=?)" in s for s in plan), plan


GUARDED = sorted(
    p.stem
    for p in (sql_root() / "sqlite").glob("*.sql")
    if "union all" in p.read_text(encoding="utf-8")
    and "with recursive" not in p.read_text(encoding="utf-8")
)


@pytest.mark.parametrize("name", GUARDED)
def test_sqlite_guarded_statements_run_exactly_one_branch(
    sqlite_db: sqlite3.Connection, name: str
) -> None:
    """Every SQLite file written as guarded branches has exactly one branch whose
    guards hold, for every combination of its parameters given or NULL (so the
    file is safe to run as written), and that branch alone is a statement SQLite
    plans."""
    import itertools

    sql = statement("sqlite", name)
    split = branches(sql)
    assert split is not None and len(split[1]) >= 2, name
    params = guard_parameters(sql)
    assert params, name
    for size in range(len(params) + 1):
        for given in itertools.combinations(params, size):
            values = {p: ("x" if p in given else None) for p in params}
            branch = running_branch(sqlite_db, sql, values)
            sqlite_db.execute("explain query plan " + branch, _values(branch, values)).fetchall()


STATUS_FILES = sorted(
    p.stem
    for p in (sql_root() / "sqlite").glob("*.sql")
    if ":status" in p.read_text(encoding="utf-8")
)


@pytest.mark.parametrize("name", STATUS_FILES)
def test_sqlite_statements_stay_prepared_whatever_the_status(
    sqlite_db: sqlite3.Connection, name: str
) -> None:
    """A statement is prepared once, not again at each new ``:status``.

    SQLite compares a bare parameter in a top-level ``status = :status`` with the
    partial lease index's ``status = 'running'``, so the plan depends on the value
    and the statement is compiled again whenever it changes (a guarded statement
    of ten branches: ~0.1 ms per run). ``status = +:status`` (the same value)
    keeps the seek without that. The authorizer runs at each compile: it must not
    run when only the values change.
    """
    sql = statement("sqlite", name)
    compiles = 0

    def authorizer(*_: Any) -> int:
        nonlocal compiles
        compiles += 1
        return sqlite3.SQLITE_OK

    def values(status: str) -> dict[str, Any]:
        out = _values(sql, {"status": status})
        out.update({k: 10 for k in ("scan_limit", "cap", "skip") if k in out})
        out.update({k: "x" for k in ("text", "raw_text") if k in out})
        return out

    sqlite_db.execute("savepoint stay_prepared")
    try:
        sqlite_db.set_authorizer(authorizer)
        sqlite_db.execute(sql, values("succeeded")).fetchall()
        compiled = compiles
        for status in ("failed", "canceled", "succeeded"):
            sqlite_db.execute(sql, values(status)).fetchall()
        assert compiled > 0
        assert compiles == compiled, f"{name} compiled again for a new status"
    finally:
        sqlite_db.set_authorizer(None)
        sqlite_db.execute("rollback to stay_prepared")
        sqlite_db.execute("release stay_prepared")


def test_sqlite_store_runs_sqlite_statements_as_written() -> None:
    """The purge the store picks is the file by name, unchanged (no Python edits a
    statement's text: ``engine._sql`` has no rewriter left to call)."""
    import engine._sql
    from engine.store._sqlite_operations import purge_statement

    assert not hasattr(engine._sql, "specialise")
    for active in (frozenset(), frozenset({"queue"}), frozenset({"status", "name"})):
        name = "purge" if "queue" in active else "purge_by_age"
        assert purge_statement(active) == statement("sqlite", name)


# -- Postgres ---------------------------------------------------------------------------


@pytest.fixture
async def pg_plans(pg_store: PostgresStore, pg_dsn: str, pg_schema: str) -> Any:
    import psycopg

    conn = await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True)
    await conn.execute(f'set search_path to "{pg_schema}"')
    await conn.execute(
        """
        insert into cairnq_tasks (id, name, queue, status, payload, run_at_ms, root_id,
                                  created_at_ms, updated_at_ms, completed_at_ms,
                                  worker_id, lease_until_ms)
        select 'task_' || lpad(g::text, 6, '0'), 'n' || (g % 5), 'q' || (g % 3),
               (array['queued', 'running', 'succeeded', 'failed', 'canceled'])[1 + g % 5],
               '{}'::jsonb, g, 'task_' || lpad(g::text, 6, '0'), g, g,
               case when g % 5 >= 2 then g end,
               case when g % 5 = 1 then 'w' end,
               case when g % 5 = 1 then g + 1000 end
        from generate_series(1, 4000) as g
        """
    )
    await conn.execute("analyze cairnq_tasks")
    await conn.execute("set enable_seqscan = off")

    async def plan(sql: str, given: Any) -> list[dict[str, Any]]:
        cur = await conn.execute("explain (format json) " + sql, given)
        row = await cur.fetchone()
        assert row is not None
        nodes: list[dict[str, Any]] = []
        stack = [row[0][0]["Plan"]]
        while stack:
            node = stack.pop()
            nodes.append(node)
            stack.extend(node.get("Plans", []))
        return nodes

    plan.conn = conn  # type: ignore[attr-defined]
    yield plan
    await conn.close()


SEQ_SCAN_OF_TASKS = ("Seq Scan", "cairnq_tasks")


def _assert_pg(nodes: list[dict[str, Any]], indexes: set[str]) -> None:
    seq = [
        n
        for n in nodes
        if n["Node Type"] == "Seq Scan" and n.get("Relation Name") == "cairnq_tasks"
    ]
    assert not seq, f"sequential scan of cairnq_tasks: {nodes}"
    used = {n.get("Index Name") for n in nodes}
    assert used & indexes, (indexes, used)


def _pg_values(name: str, given: dict[str, Any]) -> dict[str, Any]:
    values = _values(statement("postgres", name), given)
    for key in ("queues", "names"):
        if isinstance(values.get(key), str):
            values[key] = ["q0", "q1"] if key == "queues" else ["n1", "n2"]
    return values


@pytest.mark.postgres
@pytest.mark.parametrize(("name", "given", "indexes"), CLAIMS)
async def test_postgres_claim_variants_seek_the_claim_indexes(
    pg_plans: Any, name: str, given: dict[str, Any], indexes: set[str]
) -> None:
    from engine.store.postgres import _sql

    if name in ("claim", "claim_one_name"):
        # Several queues: Postgres may instead read the queued rows by status first
        # (status_completed_idx leads with status); either way no row outside
        # status='queued' is read.
        indexes = indexes | {"cairnq_tasks_status_completed_idx"}
    _assert_pg(await pg_plans(_sql(name), _pg_values(name, given)), indexes)


@pytest.mark.postgres
async def test_postgres_recovery_and_probe_read_the_lease_index(pg_plans: Any) -> None:
    from engine.store.postgres import _sql

    recover = await pg_plans(_sql("recover_leases"), _pg_values("recover_leases", {}))
    _assert_pg(recover, LEASE)
    nodes = await pg_plans(_sql("claimable_probe"), _pg_values("claimable_probe", {"names": None}))
    _assert_pg(nodes, LEASE)
    _assert_pg(nodes, {*CLAIM_INDEXES, "cairnq_tasks_status_completed_idx"})


@pytest.mark.postgres
@pytest.mark.parametrize(("active", "indexes"), PURGES)
async def test_postgres_purge_shapes_read_a_completion_index(
    pg_plans: Any, active: frozenset[str], indexes: set[str]
) -> None:
    nulls = {f: None for f in PURGE_FILTERS if f not in active}
    values = _pg_values("purge", {**nulls, "older_than_ms": 0})
    sql = _purge_statement(values)  # unprepared: planned with the values bound
    # Postgres may prefer the plain completion index for its order (the LIMIT
    # stops early); any completion index keeps the read off live rows.
    _assert_pg(await pg_plans(sql, values), COMPLETION)


@pytest.mark.postgres
@pytest.mark.parametrize("active", LIST_SHAPES, ids=lambda a: "+".join(sorted(a)))
async def test_postgres_list_shapes_use_a_filter_index(
    pg_plans: Any, active: frozenset[str]
) -> None:
    from engine.store.postgres import _sql

    sql = _sql("list")  # unprepared: planned with the values bound
    nulls = {f: None for f in LIST_FILTERS if f not in active}
    wanted = set().union(*(LIST_INDEXES.get(f, set()) for f in active))
    if "correlation_id" in active:
        wanted.add("cairnq_tasks_correlation_idx")  # Postgres indexes it; SQLite does not
    _assert_pg(await pg_plans(sql, _pg_values("list", nulls)), wanted)


def test_plan_helpers_catch_a_full_scan(tmp_path: Path) -> None:
    """The SQLite assertion fails on a plan that scans the table (guards the guard)."""
    conn = sqlite3.connect(tmp_path / "bare.db")
    conn.execute("create table cairnq_tasks (id text primary key, queue text)")
    plan = _sqlite_plan(conn, "select * from cairnq_tasks where queue = :queue", {})
    with pytest.raises(AssertionError, match="full scan"):
        _assert_sqlite(plan, {"cairnq_tasks_claim_idx"})


@pytest.mark.postgres
@pytest.mark.parametrize("names", [None, ["noop"]])
async def test_postgres_probe_seeks_an_index_over_a_backlog_with_statistics(
    pg_store: PostgresStore, pg_dsn: str, pg_schema: str, names: list[str] | None
) -> None:
    """The probe, planned as the server would with real statistics (sequential
    scans allowed), never reads the whole table behind a backlog.

    The backlog is the worker bench's: half terminal, a quarter queued on the
    probed queue but due tomorrow, a quarter on another queue, then a few due
    rows appended last. A plain EXISTS over ``queue = any(...)`` was planned as
    a sequential scan here (the clock is unknown at plan time, so the planner
    expected a due row early in the heap; 21 ms per probe at 100k rows).
    """
    import psycopg

    from engine.store.postgres import _sql

    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        await conn.execute(f'set search_path to "{pg_schema}"')
        await conn.execute(
            """
            insert into cairnq_tasks (id, name, queue, status, payload, run_at_ms,
                                      created_at_ms, updated_at_ms, completed_at_ms)
            select 'task_' || lpad(g::text, 8, '0'), 'noop',
                   case when g % 4 = 3 then 'other' else 'default' end,
                   case when g % 4 < 2 then 'succeeded' else 'queued' end, '{}'::jsonb,
                   case when g % 4 = 2 then 9e15::bigint else 0 end, 0, 0,
                   case when g % 4 < 2 then 1 end
            from generate_series(1, 40000) as g
            """
        )
        await conn.execute(
            "insert into cairnq_tasks (id, name, queue, status, payload, run_at_ms, "
            "created_at_ms, updated_at_ms) select 'task_z' || g, 'noop', 'default', 'queued', "
            "'{}'::jsonb, 0, 0, 0 from generate_series(1, 10) as g"
        )
        await conn.execute("analyze cairnq_tasks")
        cur = await conn.execute(
            "explain (format json) " + _sql("claimable_probe"),
            {"queues": ["default"], "names": names},
        )
        row = await cur.fetchone()
    assert row is not None
    stack, scans = [row[0][0]["Plan"]], []
    while stack:
        node = stack.pop()
        scans.append(node.get("Node Type"))
        stack.extend(node.get("Plans", []))
    assert "Seq Scan" not in scans, scans


def _purge_statement(given: dict[str, Any]) -> str:
    """The purge the store runs for these filters (``PostgresOperations._purge``)."""
    from engine.store.postgres import _sql

    return _sql("purge_in_queue" if given.get("queue") is not None else "purge")


PURGE_BACKLOG_SHAPES = [
    {},
    {"queue": "default"},
    {"status": "failed"},
    {"name": "noop"},
    {"queue": "other", "status": "failed", "name": "noop"},
]


@pytest.mark.postgres
@pytest.mark.parametrize("limit", [100, 1000])
@pytest.mark.parametrize("analyzed", [True, False], ids=["statistics", "no-statistics"])
@pytest.mark.parametrize(
    "filters", PURGE_BACKLOG_SHAPES, ids=lambda f: "+".join(sorted(f)) or "unfiltered"
)
async def test_postgres_purge_walks_a_completion_index_with_or_without_statistics(
    pg_store: PostgresStore,
    pg_dsn: str,
    pg_schema: str,
    filters: dict[str, str],
    analyzed: bool,
    limit: int,
) -> None:
    """Purge, planned as the server plans the store's call (values bound,
    sequential scans allowed), walks a completion index in order and stops at
    the limit, on a table with planner statistics or with none (new, or filled
    faster than autoanalyze runs), and deletes by primary key.

    Without statistics the candidates were read by a bitmap of every terminal
    row (or every row of the name) and sorted to keep the first :limit (100,000
    finished rows, purge of 100: ~400 ms; after ANALYZE, 10-14 ms).
    ``delete ... where id in (select ... limit n)`` had been planned as a hash
    semi join over a sequential scan of cairnq_tasks.
    """
    import psycopg

    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        await conn.execute(f'set search_path to "{pg_schema}"')
        # No autoanalyze behind the test's back: "no statistics" stays so.
        await conn.execute("alter table cairnq_tasks set (autovacuum_enabled = false)")
        await conn.execute(
            """
            insert into cairnq_tasks (id, name, queue, status, payload, run_at_ms,
                                      created_at_ms, updated_at_ms, completed_at_ms)
            select 'task_' || lpad(g::text, 8, '0'), 'noop',
                   case when g % 4 = 3 then 'other' else 'default' end,
                   case when g % 5 = 0 then 'failed' else 'succeeded' end,
                   '{}'::jsonb, 0, g, g, g
            from generate_series(1, 40000) as g
            """
        )
        if analyzed:
            await conn.execute("analyze cairnq_tasks")
        given: dict[str, Any] = {"queue": None, "status": None, "name": None, **filters}
        given.update(older_than_ms=0, limit=limit)
        # The store runs purge unprepared: planned with the values bound.
        sql = _purge_statement(given)
        cur = await conn.execute("explain (format json) " + sql, given)  # type: ignore[operator]
        row = await cur.fetchone()
    assert row is not None
    nodes: list[dict[str, Any]] = []
    stack = [row[0][0]["Plan"]]
    while stack:
        node = stack.pop()
        nodes.append(node)
        stack.extend(node.get("Plans", []))
    assert not [n for n in nodes if n["Node Type"] == "Seq Scan"], nodes
    indexed = [n for n in nodes if "Index Name" in n]
    # The delete finds its rows by primary key ...
    assert len([n for n in indexed if n["Index Name"] == "cairnq_tasks_pkey"]) == 1, indexed
    # ... and the candidates are one ordered walk of a completion index ...
    walks = [n for n in indexed if n["Index Name"] != "cairnq_tasks_pkey"]
    assert [(n["Node Type"], n["Index Name"] in COMPLETION) for n in walks] == [
        ("Index Scan", True)
    ], walks
    # ... never sorted: the only sort orders the deleted rows for the answer.
    sorts = [n for n in nodes if n["Node Type"] in ("Sort", "Incremental Sort")]
    assert all(k.startswith("deleted.") for n in sorts for k in n["Sort Key"]), sorts


# A ``:param`` tested for NULL: an optional filter, a cursor or a range left open.
_OPTIONAL_PARAM = re.compile(r"%\([A-Za-z_]\w*\)s(?:::[\w\[\]]+)?\s+is\s+null", re.IGNORECASE)
# Prepared statements whose optional part a generic plan still serves: the claims'
# ``names`` is a residual filter on the claim index's walk (checked below), the
# probe's ``:names is null`` a one-time guard of a whole branch.
_PREPARED_WITH_OPTIONAL = {"claim", "claim_one_queue", "claimable_probe"}


def test_postgres_statements_with_optional_filters_run_unprepared() -> None:
    """Every Postgres statement with an optional filter is planned per call with its
    values (run unprepared), except the prepared ones whose generic plan is checked."""
    from engine._sql import sql_root
    from engine.store._pg_statements import PLANNED_WITH_VALUES

    names = {p.stem for p in (sql_root() / "postgres").glob("*.sql")}
    optional = {n for n in names if _OPTIONAL_PARAM.search(statement("postgres", n))}
    assert names >= PLANNED_WITH_VALUES
    assert optional - _PREPARED_WITH_OPTIONAL == PLANNED_WITH_VALUES
    for name in PLANNED_WITH_VALUES:
        header = (sql_root() / "postgres" / f"{name}.sql").read_text(encoding="utf-8")
        assert "unprepared" in header.split("\nselect")[0].split("\nwith")[0], name


def _pg_literal(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, list):
        return "array[" + ", ".join(_pg_literal(v) for v in value) + "]"
    return str(value) if isinstance(value, int) else "'" + str(value) + "'"


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("name", "given", "indexes"), [c for c in CLAIMS if c[0] in _PREPARED_WITH_OPTIONAL]
)
async def test_postgres_claim_variants_generic_plans_seek_the_claim_indexes(
    pg_plans: Any, name: str, given: dict[str, Any], indexes: set[str]
) -> None:
    """The claims with optional ``names`` stay prepared: the plan the server settles
    on after five calls, made without the values, still reads a claim index
    (``names`` given or NULL)."""
    from engine.store.postgres import _sql

    if name == "claim":
        indexes = indexes | {"cairnq_tasks_status_completed_idx"}  # as above
    values = _pg_values(name, given)
    order = sorted(values)
    sql = _sql(name)
    for place, key in enumerate(order, start=1):
        sql = sql.replace(f"%({key})s", f"${place}")
    await pg_plans.conn.execute(f"prepare generic_claim as {sql}")
    await pg_plans.conn.execute("set plan_cache_mode = force_generic_plan")
    try:
        # A generic plan is made without the values: these only fill the call.
        args = ", ".join(_pg_literal(values[k]) for k in order)
        _assert_pg(await pg_plans(f"execute generic_claim({args})", None), indexes)
    finally:
        await pg_plans.conn.execute("reset plan_cache_mode")
        await pg_plans.conn.execute("deallocate generic_claim")


@pytest.mark.postgres
async def test_postgres_store_plans_a_filtered_list_with_its_values_after_unfiltered_ones(
    pg_dsn: str, pg_schema: str
) -> None:
    """Through the store: ten unfiltered lists, then one by a rare name. Prepared,
    the server could have settled on a generic plan by then (made without the
    values: no filter's index); the list is never prepared, so the name index
    serves the filtered call."""
    import psycopg

    store = PostgresStore(pg_dsn, schema=pg_schema, max_size=1)
    await store.connect()
    try:
        async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as admin:
            await admin.execute(f'set search_path to "{pg_schema}"')
            await admin.execute(
                """
                insert into cairnq_tasks (id, name, queue, status, payload, run_at_ms,
                                          created_at_ms, updated_at_ms)
                select 'task_' || lpad(g::text, 8, '0'),
                       case when g % 2000 = 0 then 'rare' else 'common' end,
                       'default', 'queued', '{}'::jsonb, 0, g, g
                from generate_series(1, 20000) as g
                """
            )
            await admin.execute("analyze cairnq_tasks")

            async def name_index_scans() -> int:
                cur = await admin.execute(
                    "select coalesce(sum(idx_scan), 0) from pg_stat_user_indexes"
                    " where schemaname = %s and indexrelname = 'cairnq_tasks_name_idx'",
                    [pg_schema],
                )
                row = await cur.fetchone()
                assert row is not None
                return int(row[0])

            for _ in range(10):
                assert len(await store.list(limit=5)) == 5
            before = await name_index_scans()
            rare = await store.list(name="rare", limit=50)
            assert len(rare) == 10

            async def flush_and_prepared(conn: Any) -> list[str]:
                await conn.execute("select pg_stat_force_next_flush()")
                cur = await conn.execute("select statement from pg_prepared_statements")
                return [r["statement"] for r in await cur.fetchall()]

            prepared = await store._run(flush_and_prepared, write=False)
            assert not [s for s in prepared if "is null or" in s], prepared

            for _ in range(50):  # the flush lands once the store's connection is idle
                await admin.execute("select pg_stat_clear_snapshot()")
                if await name_index_scans() > before:
                    break
                await asyncio.sleep(0.1)
            assert await name_index_scans() > before
    finally:
        await store.close()
