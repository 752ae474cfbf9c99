"""One set of rules for both dialects, and one bad write failing only itself.

Every public store method's arguments go through ``engine._rules`` before any
I/O: the table below runs each bad value against SQLite and Postgres and
expects the same exception type (``ValueError`` naming the field, or
``SerializationError`` for JSON values) with nothing written. Then bad and
failing writes are mixed into groups of concurrent good ones: the good ones
commit, only the culprit gets the error.
"""

from __future__ import annotations

import asyncio
import math
import sqlite3
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from store_support import Database
from worker_support import finished

from engine import CairnQ, LostLease, SerializationError, Task, TaskError, TaskStore, Worker
from engine.store import _sqlite_sync
from engine.store.postgres import PostgresStore

W = "worker_rules"
BAD_TEXT = "bad\ud800"  # a lone surrogate: no UTF-8 column can store it


@dataclass(frozen=True)
class Seeded:
    queued: str
    running: str


Call = Callable[[TaskStore, Seeded], Awaitable[Any]]


def submit(**kwargs: Any) -> Call:
    return lambda s, _: s.submit(**{"name": "job", **kwargs})


def owned(method: str, **kwargs: Any) -> Call:
    def call(s: TaskStore, seeded: Seeded) -> Awaitable[Any]:
        args = {"task_id": seeded.running, "worker_id": W, **kwargs}
        return getattr(s, method)(**args)  # type: ignore[no-any-return]

    return call


def call(method: str, *args: Any, **kwargs: Any) -> Call:
    return lambda s, _: getattr(s, method)(*args, **kwargs)


def ids(method: str, **kwargs: Any) -> Call:
    """A batch call on the running task's id."""
    return lambda s, c: getattr(s, method)(**{"task_ids": [c.running], "worker_id": W, **kwargs})


def claim(**kwargs: Any) -> Call:
    return lambda s, _: s.claim(**{"queues": ["default"], "worker_id": W, **kwargs})


def session_drawing(names: Any, limit: Any) -> Call:
    async def plan(draw: Any) -> Any:
        return await draw(names, limit)

    return lambda s, _: s.claim_session(queues=["default"], worker_id=W, names=None, plan=plan)


V, S = ValueError, SerializationError
NAN, INF = math.nan, math.inf

# (case, call, exception type, what the message must name)
CASES: list[tuple[str, Call, type[Exception], str]] = [
    # submit
    ("submit name int", call("submit", name=5), V, "name"),
    ("submit name empty", submit(name=""), V, "name"),
    ("submit name surrogate", submit(name=BAD_TEXT), V, "name"),
    ("submit queue empty", submit(queue=""), V, "queue"),
    ("submit queue surrogate", submit(queue=BAD_TEXT), V, "queue"),
    ("submit queue int", submit(queue=3), V, "queue"),
    ("submit key empty", submit(key=""), V, "key"),
    ("submit key surrogate", submit(key=BAD_TEXT), V, "key"),
    ("submit key int", submit(key=5), V, "key"),
    ("submit conflict unknown", submit(key="k2", conflict="nope"), V, "conflict"),
    ("submit conflict int", submit(key="k2", conflict=1), V, "conflict"),
    ("submit max_attempts 0", submit(max_attempts=0), V, "max_attempts"),
    ("submit max_attempts 2**31", submit(max_attempts=2**31), V, "max_attempts"),
    ("submit max_attempts bool", submit(max_attempts=True), V, "max_attempts"),
    ("submit max_attempts float", submit(max_attempts=1.5), V, "max_attempts"),
    ("submit priority 2**31", submit(priority=2**31), V, "priority"),
    ("submit priority -2**31-1", submit(priority=-(2**31) - 1), V, "priority"),
    ("submit priority 2**63", submit(priority=2**63), V, "priority"),
    ("submit priority str", submit(priority="1"), V, "priority"),
    ("submit priority bool", submit(priority=True), V, "priority"),
    ("submit delay_ms -1", submit(delay_ms=-1), V, "delay_ms"),
    ("submit delay_ms 2**63", submit(delay_ms=2**63), V, "delay_ms"),
    ("submit delay_ms float", submit(delay_ms=1.0), V, "delay_ms"),
    ("submit parent_id int", submit(parent_id=5), V, "parent_id"),
    ("submit parent_id surrogate", submit(parent_id=BAD_TEXT), V, "parent_id"),
    ("submit root_id surrogate", submit(root_id=BAD_TEXT), V, "root_id"),
    ("submit correlation_id surrogate", submit(correlation_id=BAD_TEXT), V, "correlation_id"),
    ("submit payload surrogate", submit(payload={"s": BAD_TEXT}), S, ""),
    ("submit payload key surrogate", submit(payload={BAD_TEXT: 1}), S, ""),
    ("submit payload nan", submit(payload={"x": NAN}), S, ""),
    ("submit payload set", submit(payload={1, 2}), S, ""),
    ("submit payload 2**64", submit(payload=[2**64]), S, ""),
    ("submit metadata list", submit(metadata=[1]), S, "metadata"),
    ("submit metadata surrogate", submit(metadata={"m": BAD_TEXT}), S, ""),
    # reads
    ("get int", call("get", 5), V, "task_id"),
    ("get empty", call("get", ""), V, "task_id"),
    ("get None", call("get", None), V, "task_id"),
    ("get surrogate", call("get", BAD_TEXT), V, "task_id"),
    ("get_by_key int", call("get_by_key", 5), V, "key"),
    ("get_by_key surrogate", call("get_by_key", BAD_TEXT), V, "key"),
    ("get_status int", call("get_status", 5), V, "task_id"),
    ("get_status_by_key bytes", call("get_status_by_key", b"k"), V, "key"),
    ("list status", call("list", status="nope"), V, "status"),
    ("list limit -1", call("list", limit=-1), V, "limit"),
    ("list limit 2**63", call("list", limit=2**63), V, "limit"),
    ("list offset -1", call("list", offset=-1), V, "offset"),
    ("list offset float", call("list", offset=0.0), V, "offset"),
    ("list queue int", call("list", queue=5), V, "queue"),
    ("list name surrogate", call("list", name=BAD_TEXT), V, "name"),
    ("list root_id surrogate", call("list", root_id=BAD_TEXT), V, "root_id"),
    ("list correlation_id int", call("list", correlation_id=1), V, "correlation_id"),
    ("stats queue int", call("stats", 5), V, "queue"),
    ("stats queue surrogate", call("stats", BAD_TEXT), V, "queue"),
    ("queue_depth queue empty", call("queue_depth", "", 1), V, "queue"),
    ("queue_depth max -1", call("queue_depth", "default", -1), V, "max_depth"),
    ("queue_depth max 2**63", call("queue_depth", "default", 2**63), V, "max_depth"),
    # cancel / retry / purge
    ("cancel int", call("cancel", 5), V, "task_id"),
    ("cancel surrogate", call("cancel", BAD_TEXT), V, "task_id"),
    ("cancel_by_key empty", call("cancel_by_key", ""), V, "key"),
    ("retry int", call("retry", 5), V, "task_id"),
    ("retry reset_attempt int", call("retry", "task_x", reset_attempt=1), V, "reset_attempt"),
    ("retry_by_key reset str", call("retry_by_key", "k", reset_attempt="y"), V, "reset_attempt"),
    ("purge older_than_ms -1", call("purge", older_than_ms=-1), V, "older_than_ms"),
    ("purge older_than_ms 2**63", call("purge", older_than_ms=2**63), V, "older_than_ms"),
    ("purge limit 0", call("purge", limit=0), V, "limit"),
    ("purge limit 2**63", call("purge", limit=2**63), V, "limit"),
    ("purge status live", call("purge", status="running"), V, "status"),
    ("purge queue int", call("purge", queue=5), V, "queue"),
    ("purge name surrogate", call("purge", name=BAD_TEXT), V, "name"),
    # claims
    ("claim queues str", claim(queues="default"), V, "queues"),
    ("claim queues empty", claim(queues=[]), V, "queues"),
    ("claim queue surrogate", claim(queues=[BAD_TEXT]), V, "queues"),
    ("claim queue int", claim(queues=[5]), V, "queues"),
    ("claim worker_id empty", claim(worker_id=""), V, "worker_id"),
    ("claim worker_id surrogate", claim(worker_id=BAD_TEXT), V, "worker_id"),
    ("claim lease_ms 0", claim(lease_ms=0), V, "lease_ms"),
    ("claim lease_ms 2**63", claim(lease_ms=2**63), V, "lease_ms"),
    ("claim limit -1", claim(limit=-1), V, "limit"),
    ("claim limit 2**63", claim(limit=2**63), V, "limit"),
    ("claim limit float", claim(limit=1.0), V, "limit"),
    ("claim names str", claim(names="job"), V, "names"),
    ("claim names int", claim(names=[5]), V, "names"),
    ("claim names surrogate", claim(names=[BAD_TEXT]), V, "names"),
    ("draw limit -1", session_drawing(None, -1), V, "limit"),
    ("draw limit 2**63", session_drawing(None, 2**63), V, "limit"),
    ("draw names surrogate", session_drawing([BAD_TEXT], 1), V, "names"),
    # named reads
    ("read_statement write", call("read_statement", "cancel", {"id": "task_x"}), V, "statement"),
    ("read_statement lock", call("read_statement", "lock_key", {"key": "k"}), V, "statement"),
    ("read_statement int", call("read_statement", 5, {}), V, "statement"),
    ("read_statement path", call("read_statement", "inspect_../get", {}), V, "statement"),
    ("read_statement unknown", call("read_statement", "inspect_nope", {}), V, "statement"),
    # owned writes
    ("heartbeat task_id int", owned("heartbeat", task_id=5), V, "task_id"),
    ("heartbeat worker surrogate", owned("heartbeat", worker_id=BAD_TEXT), V, "worker_id"),
    ("heartbeat lease_ms 0", owned("heartbeat", lease_ms=0), V, "lease_ms"),
    ("heartbeat lease_ms 2**63", owned("heartbeat", lease_ms=2**63), V, "lease_ms"),
    ("heartbeat_batch ids str", ids("heartbeat_batch", task_ids="abc"), V, "task_ids"),
    ("heartbeat_batch id int", ids("heartbeat_batch", task_ids=[5]), V, "task_ids"),
    ("heartbeat_batch lease -1", ids("heartbeat_batch", lease_ms=-1), V, "lease_ms"),
    ("heartbeat_batch worker int", ids("heartbeat_batch", worker_id=1), V, "worker_id"),
    ("progress nan", owned("progress", progress=NAN), V, "progress"),
    ("progress inf", owned("progress", progress=INF), V, "progress"),
    ("progress 10**400", owned("progress", progress=10**400), V, "progress"),
    ("progress bool", owned("progress", progress=True), V, "progress"),
    ("progress str", owned("progress", progress="0.5"), V, "progress"),
    ("progress message int", owned("progress", message=5), V, "message"),
    ("progress message surrogate", owned("progress", message=BAD_TEXT), V, "message"),
    ("progress task_id empty", owned("progress", task_id="", progress=0.5), V, "task_id"),
    ("succeed task_id empty", owned("succeed", task_id=""), V, "task_id"),
    ("succeed result nan", owned("succeed", result=NAN), S, ""),
    ("complete worker_id int", owned("complete", worker_id=5), V, "worker_id"),
    ("complete result surrogate", owned("complete", result={"s": BAD_TEXT}), S, ""),
    ("fail retryable int", owned("fail", error={"type": "E"}, retryable=1), V, "retryable"),
    ("fail retryable None", owned("fail", error={"type": "E"}, retryable=None), V, "retryable"),
    ("fail delay_ms -1", owned("fail", error={"type": "E"}, delay_ms=-1), V, "delay_ms"),
    ("fail delay_ms 2**63", owned("fail", error={"type": "E"}, delay_ms=2**63), V, "delay_ms"),
    ("fail task_id int", owned("fail", task_id=5, error={"type": "E"}), V, "task_id"),
    ("complete_many ids str", ids("complete_many", task_ids="abc"), V, "task_ids"),
    ("complete_many id empty", ids("complete_many", task_ids=[""]), V, "task_ids"),
    ("complete_many worker None", ids("complete_many", worker_id=None), V, "worker_id"),
]  # fmt: skip


def client(method: str, *args: Any, **kwargs: Any) -> Call:
    """A ``CairnQ`` method over the store (the client's own checks, then the store's)."""

    async def call(s: TaskStore, seeded: Seeded) -> Any:
        bound = [seeded.queued if a is QUEUED else a for a in args]
        result = getattr(CairnQ(s), method)(*bound, **kwargs)
        return await result if asyncio.iscoroutine(result) else result

    return call


QUEUED = object()  # stands for the seeded queued task's id

CLIENT_CASES: list[tuple[str, Call, type[Exception], str]] = [
    ("client submit name surrogate", client("submit", BAD_TEXT), V, "name"),
    ("client submit priority 2**31", client("submit", "job", priority=2**31), V, "priority"),
    ("client submit delay -1", client("submit", "job", delay_ms=-1), V, "delay_ms"),
    ("client call payload nan", client("call", "job", {"x": NAN}), S, ""),
    ("client get int", client("get", 5), V, "task_id"),
    ("client get_status_by_key empty", client("get_status_by_key", ""), V, "key"),
    ("client wait int", client("wait", 5), V, "task_id"),
    ("client wait surrogate", client("wait", BAD_TEXT), V, "task_id"),
    ("client wait timeout -1", client("wait", QUEUED, timeout_ms=-1), V, "timeout_ms"),
    ("client wait poll 0", client("wait", QUEUED, poll_ms=0), V, "poll_ms"),
    ("client wait max_poll 0", client("wait", QUEUED, max_poll_ms=0), V, "max_poll_ms"),
    ("client wait_by_key empty", client("wait_by_key", ""), V, "key"),
    ("client wait_by_key surrogate", client("wait_by_key", BAD_TEXT), V, "key"),
    ("client list limit -1", client("list", limit=-1), V, "limit"),
    ("client purge limit 0", client("purge", limit=0), V, "limit"),
    ("client retry reset int", client("retry", QUEUED, reset_attempt=0), V, "reset_attempt"),
    ("client queue_depth -1", client("queue_depth", "default", -1), V, "max_depth"),
    ("client watch poll 0", client("watch", print, poll_ms=0), V, "poll_ms"),
    ("client watch queues str", client("watch", print, queues="default"), V, "queues"),
]


async def seed(store: TaskStore) -> Seeded:
    """A keyed running task and a queued one: state every bad call could disturb."""
    running = await store.submit(name="job", key="k")
    await store.claim(queues=["default"], worker_id=W)
    queued = await store.submit(name="job", key="k2", priority=-1)
    return Seeded(queued=queued.id, running=running.id)


async def test_every_bad_argument_is_refused_alike_with_nothing_written(
    store: TaskStore, database: Database
) -> None:
    seeded = await seed(store)
    before = database.snapshot()
    problems = []
    for case, call, expected, field in CASES + CLIENT_CASES:
        try:
            await call(store, seeded)
        except Exception as exc:
            if type(exc) is not expected:
                problems.append(f"{case}: {type(exc).__name__}: {exc}")
            elif field not in str(exc):
                problems.append(f"{case}: {exc} does not name {field!r}")
        else:
            problems.append(f"{case}: accepted")
    assert problems == []
    assert database.snapshot() == before


async def test_nul_is_refused_only_where_the_dialect_cannot_hold_it(
    store: TaskStore, database: Database
) -> None:
    seeded = await seed(store)
    before = database.snapshot()
    calls: list[Call] = [
        submit(name="a\x00b"),
        submit(key="a\x00b"),
        submit(payload={"s": "a\x00b"}),
        owned("progress", message="a\x00b"),
        owned("complete", result="a\x00b"),
        claim(queues=["a\x00b"]),
        lambda s, _: s.get("a\x00b"),
    ]
    outcomes = []
    for call in calls:
        try:
            await call(store, seeded)
            outcomes.append("ok")
        except (ValueError, LostLease) as exc:
            outcomes.append(type(exc).__name__)
    if store.text_refuses_nul:
        expected = ["ValueError"] * 2 + ["SerializationError"] + ["ValueError"]
        assert outcomes == [*expected, "SerializationError", "ValueError", "ValueError"]
        assert database.snapshot() == before
    else:  # SQLite stores NUL like any character
        assert outcomes == ["ok"] * 7
        task = await store.get(seeded.running)
        assert task is not None and task.result == "a\x00b"


async def test_a_task_error_with_a_truthy_flag_is_recorded(store: TaskStore) -> None:
    """The store takes only a bool; a handler's TaskError turns its flag into one."""
    error = TaskError("m", retryable=1)  # type: ignore[arg-type]
    task = await store.submit(name="job")
    await store.claim(queues=["default"], worker_id=W)
    failed = await store.fail(
        task_id=task.id, worker_id=W, error=error.envelope(), retryable=error.retryable
    )
    assert failed.status == "queued" and failed.error is not None
    assert failed.error["retryable"] is True


# -- one bad write fails only itself ------------------------------------------------------

BAD_SUBMITS = [
    pytest.param({"name": BAD_TEXT}, ValueError, id="name-surrogate"),
    pytest.param({"queue": BAD_TEXT}, ValueError, id="queue-surrogate"),
    pytest.param({"key": BAD_TEXT}, ValueError, id="key-surrogate"),
    pytest.param({"correlation_id": BAD_TEXT}, ValueError, id="lineage-surrogate"),
    pytest.param({"priority": 2**63}, ValueError, id="priority-2**63"),
    pytest.param({"priority": 2**31}, ValueError, id="priority-2**31"),
    pytest.param({"delay_ms": 2**63}, ValueError, id="delay-2**63"),
    pytest.param({"payload": {"s": BAD_TEXT}}, SerializationError, id="payload-surrogate"),
]


@pytest.mark.parametrize(("bad", "error"), BAD_SUBMITS)
async def test_a_bad_submit_among_good_ones_fails_only_itself(
    store: TaskStore, database: Database, bad: dict[str, Any], error: type[Exception]
) -> None:
    client = CairnQ(store)
    good = [client.submit("good", {"i": i}) for i in range(20)]
    outcomes = await asyncio.gather(
        *good[:10], client.submit(**{"name": "bad", **bad}), *good[10:], return_exceptions=True
    )
    failed = outcomes.pop(10)
    assert type(failed) is error
    assert all(isinstance(t, Task) for t in outcomes), outcomes
    stored = database.rows("select name, payload from cairnq_tasks order by id")
    assert len(stored) == 20 and {name for name, _ in stored} == {"good"}
    for task in outcomes:
        assert isinstance(task, Task)
        read = await store.get(task.id)
        assert read is not None and read.payload == task.payload


BAD_OWNED = [
    pytest.param("progress", {"message": BAD_TEXT}, ValueError, id="progress-message"),
    pytest.param("progress", {"progress": math.nan}, ValueError, id="progress-nan"),
    pytest.param(
        "complete", {"result": {"ok": "\ud800"}}, SerializationError, id="complete-result"
    ),
    pytest.param("succeed", {"result": math.inf}, SerializationError, id="succeed-result"),
    pytest.param("heartbeat", {"lease_ms": 2**63}, ValueError, id="heartbeat-lease"),
    pytest.param("fail", {"error": {}, "delay_ms": 2**63}, ValueError, id="fail-delay"),
    pytest.param("fail", {"error": {}, "retryable": "yes"}, ValueError, id="fail-retryable"),
]


async def running(store: TaskStore, count: int) -> list[Task]:
    for i in range(count):
        await store.submit(name="job", payload={"i": i})
    claimed = await store.claim(queues=["default"], worker_id=W, limit=count)
    assert len(claimed) == count
    return sorted(claimed, key=lambda t: t.id)


@pytest.mark.parametrize(("method", "bad", "error"), BAD_OWNED)
async def test_a_bad_owned_write_among_good_ones_fails_only_itself(
    store: TaskStore, database: Database, method: str, bad: dict[str, Any], error: type[Exception]
) -> None:
    tasks = await running(store, 10)
    writes = [store.complete(task_id=t.id, worker_id=W, result={"ok": 1}) for t in tasks[:9]]
    writes.append(getattr(store, method)(task_id=tasks[9].id, worker_id=W, **bad))
    outcomes = await asyncio.gather(*writes, return_exceptions=True)
    assert type(outcomes[9]) is error
    assert all(isinstance(t, Task) and t.status == "succeeded" for t in outcomes[:9]), outcomes
    stored = dict(database.rows("select id, status from cairnq_tasks"))
    assert [stored[t.id] for t in tasks] == ["succeeded"] * 9 + ["running"]
    last = await store.get(tasks[9].id)
    assert last is not None
    assert (last.message, last.progress, last.lease_until_ms) == (
        None,
        None,
        tasks[9].lease_until_ms,
    )


# -- a statement that still fails inside a group -----------------------------------------------


def refuse(database: Database, what: str, when: str) -> None:
    """A trigger that makes the database refuse ``what`` (insert/update) rows ``when``."""
    if database.dialect == "sqlite":
        database.execute(
            f"create trigger refuse before {what} on cairnq_tasks when {when} "
            "begin select raise(abort, 'refused by trigger'); end"
        )
        return
    database.execute(
        "create function refuse() returns trigger language plpgsql as $$ begin "
        f"if {when} then raise exception 'refused by trigger'; end if; return new; end $$"
    )
    database.execute(
        f"create trigger refuse before {what} on cairnq_tasks "
        "for each row execute function refuse()"
    )


async def test_a_submit_the_database_refuses_fails_only_itself(
    store: TaskStore, database: Database
) -> None:
    refuse(database, "insert", "new.name = 'boom'")
    client = CairnQ(store)
    good = [client.submit("good", {"i": i}) for i in range(20)]
    outcomes = await asyncio.gather(
        *good[:10], client.submit("boom"), *good[10:], return_exceptions=True
    )
    failed = outcomes.pop(10)
    assert isinstance(failed, Exception) and "refused by trigger" in str(failed)
    assert all(isinstance(t, Task) for t in outcomes), outcomes
    names = [name for (name,) in database.rows("select name from cairnq_tasks")]
    assert names == ["good"] * 20


async def test_an_owned_write_the_database_refuses_fails_only_itself(
    store: TaskStore, database: Database
) -> None:
    refuse(database, "update", "new.message = 'boom'")
    tasks = await running(store, 10)
    writes = [store.complete(task_id=t.id, worker_id=W, result={"ok": 1}) for t in tasks[:9]]
    writes.append(store.progress(task_id=tasks[9].id, worker_id=W, message="boom"))
    outcomes = await asyncio.gather(*writes, return_exceptions=True)
    assert isinstance(outcomes[9], Exception) and "refused by trigger" in str(outcomes[9])
    assert all(isinstance(t, Task) for t in outcomes[:9]), outcomes
    stored = dict(database.rows("select id, status from cairnq_tasks"))
    assert [stored[t.id] for t in tasks] == ["succeeded"] * 9 + ["running"]


# -- below the rules: the groups themselves ----------------------------------------------------
# Values the rules refuse never reach a group, so these reach into the groups
# (no public window) to show that a write the driver cannot even bind still
# fails alone: the group is the last line, not the rules.


def test_sqlite_batch_item_the_driver_cannot_bind_fails_alone(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "t.db", isolation_level=None)
    conn.execute("create table t (v text)")
    insert = "insert into t (v) values (:v)"
    items: list[tuple[str, dict[str, Any]]] = [(insert, {"v": f"good {i}"}) for i in range(5)]
    items.insert(2, (insert, {"v": BAD_TEXT}))
    items.append(("update t set v = :v where v = 'good 0'", {"v": 2**64}))
    outcomes = _sqlite_sync.run_batch(conn, items)
    assert isinstance(outcomes[2], UnicodeEncodeError)
    assert isinstance(outcomes[-1], OverflowError)
    assert [o for i, o in enumerate(outcomes) if isinstance(o, BaseException)] == [
        outcomes[2],
        outcomes[-1],
    ]
    assert sorted(v for (v,) in conn.execute("select v from t")) == [f"good {i}" for i in range(5)]
    conn.close()


async def test_postgres_group_member_the_driver_cannot_send_fails_alone(
    pg_store: PostgresStore,
) -> None:
    store = pg_store
    tasks = await running(store, 6)
    sql = "update cairnq_tasks set message = %(message)s where id = %(id)s returning id"
    writes = [store._group.write(sql, {"id": t.id, "message": "fine"}, t.id) for t in tasks[:5]]
    writes.append(store._group.write(sql, {"id": tasks[5].id, "message": BAD_TEXT}, tasks[5].id))
    outcomes = await asyncio.gather(*writes, return_exceptions=True)
    assert isinstance(outcomes[5], UnicodeEncodeError)
    assert outcomes[:5] == [{"id": t.id} for t in tasks[:5]]
    messages = {t.id: (await store.get(t.id)).message for t in tasks}  # type: ignore[union-attr]
    assert list(messages.values()) == ["fine"] * 5 + [None]


async def test_a_completion_the_database_refuses_fails_only_itself_in_the_worker(
    store: TaskStore, database: Database
) -> None:
    """The worker's shared ``complete_many`` is a group too: split when it fails."""
    i_is_3 = {
        "sqlite": "json_extract(new.payload, '$.i') = 3",
        "postgres": "new.payload->>'i' = '3'",
    }[database.dialect]
    refuse(database, "update", f"new.status = 'succeeded' and {i_is_3}")
    worker = Worker(store, ["default"], poll_interval_ms=20, concurrency=8)
    gate = asyncio.Event()
    started = 0

    @worker.task
    async def job(ctx: Any) -> None:
        nonlocal started
        started += 1
        await asyncio.wait_for(gate.wait(), 5)  # all eight return in one loop pass

    ids = [(await store.submit(name="job", payload={"i": i})).id for i in range(8)]
    async with worker.background():
        while started < 8:
            await asyncio.sleep(0.005)
        gate.set()
        done = await finished(store, ids[:3] + ids[4:])
        assert [t.status for t in done] == ["succeeded"] * 7
        refused = await store.get(ids[3])
        assert refused is not None and refused.status == "running"
        assert any("refused by trigger" in r.message for r in worker.snapshot().recent_errors)


async def test_a_heartbeat_the_database_refuses_fails_only_itself_in_the_worker(
    store: TaskStore, database: Database
) -> None:
    """The worker's ``heartbeat_batch`` for a batch call is a group: split when it fails."""
    i_is_1 = {
        "sqlite": "json_extract(new.payload, '$.i') = 1",
        "postgres": "new.payload->>'i' = '1'",
    }[database.dialect]
    refuse(database, "update", f"old.status = 'running' and new.status = 'running' and {i_is_1}")
    worker = Worker(
        store, ["default"], poll_interval_ms=20, lease_ms=10_000, heartbeat_interval_ms=30
    )
    seen: dict[str, Any] = {}

    @worker.task(batch=3)
    async def three(ctxs: Any) -> None:
        by_i = {c.payload["i"]: c for c in ctxs}
        seen["contexts"] = by_i
        claimed = {i: (await store.get(c.task_id)).lease_until_ms for i, c in by_i.items()}  # type: ignore[union-attr]
        seen["claimed"] = claimed
        deadline = asyncio.get_running_loop().time() + 5
        while True:  # until a beat renewed 0 and 2 (or the deadline says it never will)
            now = {i: (await store.get(c.task_id)).lease_until_ms for i, c in by_i.items()}  # type: ignore[union-attr]
            if now[0] != claimed[0] and now[2] != claimed[2]:
                break
            assert asyncio.get_running_loop().time() < deadline, now
            await asyncio.sleep(0.01)
        seen["renewed"] = now

    ids = [(await store.submit(name="three", payload={"i": i})).id for i in range(3)]
    async with worker.background():
        done = await finished(store, ids)
    assert [t.status for t in done] == ["succeeded"] * 3
    assert seen["renewed"][1] == seen["claimed"][1]  # its renewal alone was refused
    assert [seen["contexts"][i].lost_lease for i in range(3)] == [False, False, False]
    assert any("refused by trigger" in r.message for r in worker.snapshot().recent_errors)
