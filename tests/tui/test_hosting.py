"""Hosted workers: loading MODULE:ATTR, running on their own loop, and every control,
on SQLite and Postgres, with real user modules written to disk.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
from hosting_support import (
    DIALECTS,
    UserModules,
    eventually,
    status_of,
    store_factory,
    wait_state,
)

from cairnq_tui.hosting import HostError, WorkerHost, WorkerSpec
from cairnq_tui.why import hosted_reasons
from engine import CairnQ, SQLiteStore, TaskStore, active_waits

GATED = """
import asyncio, threading
from engine import Worker

gate = threading.Event()     # the test opens it to let 'hold' calls finish
started = threading.Event()

def make(store):
    w = Worker(store, ["default"], concurrency=4, poll_interval_ms=20, lease_ms=5_000)

    @w.task("noop")
    async def noop(ctx, payload):
        return {"echo": payload, "version": 1}

    @w.task("hold")
    async def hold(ctx, payload):
        started.set()
        while not gate.is_set():
            await asyncio.sleep(0.01)
        return "held"

    return w
"""


@pytest.fixture
def modules(tmp_path: Path) -> Iterator[UserModules]:
    folder = tmp_path / "user"
    folder.mkdir()
    found = UserModules(folder)
    yield found
    found.close()


@pytest.fixture(params=DIALECTS)
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], TaskStore]:
    return store_factory(request, tmp_path)


@pytest.fixture
async def client(make_store: Callable[[], TaskStore]) -> AsyncIterator[CairnQ]:
    async with CairnQ(make_store()) as cq:
        yield cq


def host_for(
    specs: list[str], make_store: Callable[[], TaskStore], reference: TaskStore | None = None
) -> WorkerHost:
    return WorkerHost(specs, make_store=make_store, target_text="unused", reference=reference)


def start_gated(
    modules: UserModules,
    make_store: Callable[[], TaskStore],
    hosts: list[WorkerHost],
    reference: TaskStore | None = None,
) -> tuple[str, WorkerHost]:
    """Write the GATED user module, host its worker and register the host for shutdown."""
    name = modules.write(GATED)
    host = host_for([f"{name}:make"], make_store, reference)
    host.start()
    hosts.append(host)
    return name, host


@pytest.fixture
def hosts() -> Iterator[list[WorkerHost]]:
    started: list[WorkerHost] = []
    yield started
    for host in started:
        host.shutdown(1.0)


async def test_hosted_worker_drains_tasks_and_reports_its_snapshot(
    modules: UserModules,
    make_store: Callable[[], TaskStore],
    client: CairnQ,
    hosts: list[WorkerHost],
) -> None:
    name, host = start_gated(modules, make_store, hosts, client.store)
    tasks = [await client.submit("noop", {"n": i}) for i in range(20)]

    async def all_done() -> bool:
        statuses = [await client.get_status(t.id) for t in tasks]
        return all(s is not None and s.status == "succeeded" for s in statuses)

    await eventually(all_done, what="20 noop tasks to succeed")
    done = await client.get(tasks[7].id)
    assert done is not None and done.result == {"echo": {"n": 7}, "version": 1}
    status = await status_of(host)
    assert status.state == "running" and status.error is None and status.loads == 1
    assert status.handles == {"noop", "hold"}
    assert status.snapshot is not None and status.snapshot.tasks_claimed >= 20
    # The worker runs on its own thread, not on the caller's.
    assert any(t.name == f"cairnq-host {name}:make" for t in threading.enumerate())


async def test_pause_lets_calls_finish_and_claims_nothing_until_resume(
    modules: UserModules,
    make_store: Callable[[], TaskStore],
    client: CairnQ,
    hosts: list[WorkerHost],
) -> None:
    name, host = start_gated(modules, make_store, hosts)
    hosted = host.workers[0]
    user = modules.module(name)
    held = await client.submit("hold")
    await eventually(lambda: _true(user.started.is_set()), what="hold to start")
    await hosted.pause()
    assert (await wait_state(host, "paused")).state == "paused"
    later = await client.submit("noop", 1)
    user.gate.set()  # the call in flight finishes while paused
    finished = await client.wait(held.id, timeout_ms=10_000)
    assert finished.result == "held"

    # The caller sees the result as the completion commits, before the worker's
    # bookkeeping for that call ends; wait for the slot to be given back.
    async def slot_free() -> bool:
        status = await status_of(host)
        return status.snapshot is not None and status.snapshot.concurrency_used == 0

    await eventually(slot_free, what="the finished call's slot to be free")
    assert (await status_of(host)).state == "paused"
    assert (await client.get_status(later.id)).status == "queued"
    await hosted.resume()
    assert (await client.wait(later.id, timeout_ms=10_000)).status == "succeeded"


async def _true(value: bool) -> bool:
    return value


async def test_drain_waits_for_in_flight_then_restart_claims_again(
    modules: UserModules,
    make_store: Callable[[], TaskStore],
    client: CairnQ,
    hosts: list[WorkerHost],
) -> None:
    name, host = start_gated(modules, make_store, hosts)
    hosted = host.workers[0]
    user = modules.module(name)
    held = await client.submit("hold")
    await eventually(lambda: _true(user.started.is_set()), what="hold to start")
    drain = asyncio.ensure_future(hosted.drain())
    assert (await wait_state(host, "draining")).state == "draining"
    assert not drain.done()
    user.gate.set()
    await asyncio.wait_for(drain, 10)
    assert (await client.get_status(held.id)).status == "succeeded"
    assert (await status_of(host)).state == "stopped"
    queued = await client.submit("noop", 2)
    await asyncio.sleep(0.1)
    assert (await client.get_status(queued.id)).status == "queued"
    await hosted.restart()
    assert (await client.wait(queued.id, timeout_ms=10_000)).status == "succeeded"
    assert (await status_of(host)).state == "running"


async def test_set_concurrency_changes_the_limit(
    modules: UserModules, make_store: Callable[[], TaskStore], hosts: list[WorkerHost]
) -> None:
    _, host = start_gated(modules, make_store, hosts)
    await host.workers[0].set_concurrency(9)

    async def nine() -> bool:
        snap = (await status_of(host)).snapshot
        return snap is not None and snap.concurrency_limit == 9

    await eventually(nine, what="concurrency limit 9")
    with pytest.raises(ValueError, match="concurrency"):
        await host.workers[0].set_concurrency(0)


async def test_reload_reports_a_broken_module_then_loads_the_fixed_one(
    modules: UserModules,
    make_store: Callable[[], TaskStore],
    client: CairnQ,
    hosts: list[WorkerHost],
) -> None:
    name, host = start_gated(modules, make_store, hosts)
    hosted = host.workers[0]
    first = await client.submit("noop", "a")
    assert (await client.wait(first.id, timeout_ms=10_000)).result["version"] == 1

    broken = GATED.replace('"version": 1}', '"version": 2}').replace(
        "def make(store):", "def make(store):\n    undefined_name\n"
    )
    modules.write(broken, name)
    with pytest.raises(HostError) as caught:
        await hosted.reload()
    message = str(caught.value)
    assert f"{name}.py, line 9" in message and "NameError" in message
    assert "Traceback" not in message
    status = await status_of(host)
    assert status.state == "failed" and status.error == message
    waiting = await client.submit("noop", "b")
    # The console goes on: pause on an unloaded worker is refused with a message.
    with pytest.raises(HostError, match="not loaded"):
        await hosted.pause()

    modules.write(GATED.replace('"version": 1}', '"version": 2}'), name)
    await hosted.reload()
    assert (await client.wait(waiting.id, timeout_ms=10_000)).result == {
        "echo": "b",
        "version": 2,
    }
    status = await status_of(host)
    assert status.state == "running" and status.error is None and status.loads == 2


async def test_handler_waits_appear_in_the_wait_registry(
    modules: UserModules,
    make_store: Callable[[], TaskStore],
    client: CairnQ,
    hosts: list[WorkerHost],
) -> None:
    name = modules.write(
        GATED
        + """
def make_waiter(store):
    w = make(store)

    @w.task("parent")
    async def parent(ctx, payload):
        child = await ctx.submit("hold")
        return (await ctx.wait(child.id, timeout_ms=10_000)).result

    return w
"""
    )
    host = host_for([f"{name}:make_waiter"], make_store)
    host.start()
    hosts.append(host)
    parent = await client.submit("parent")

    async def waiting() -> bool:
        return any(w.kind == "ctx.wait" for w in active_waits())

    await eventually(waiting, what="the handler's ctx.wait to register")
    modules.module(name).gate.set()
    assert (await client.wait(parent.id, timeout_ms=10_000)).result == "held"


LOAD_ERRORS = [
    ("def make(store:\n    pass\n", "make", "SyntaxError", ".py, line 1"),
    ("x = 1\n", "worker", "has no attribute 'worker' (it defines: x)", None),
    ("x = 1\n", "x", "'x' is a int, not an engine.Worker", None),
    ("def make(store):\n    return 42\n", "make", "returned int, not an engine.Worker", None),
    (
        "from engine import Worker\n"
        "def make(store):\n"
        "    w = Worker(store, ['default'])\n"
        "    w.register('gpu.job', lambda ctx: None, resource='gpu')\n"
        "    return w\n",
        "make",
        "resource 'gpu' is not declared",
        ".py, line 4",
    ),
    ("raise RuntimeError('boom')\n", "make", "RuntimeError: boom", ".py, line 1"),
]


@pytest.mark.parametrize(("source", "attr", "expected", "where"), LOAD_ERRORS)
def test_load_errors_name_the_module_and_line(
    modules: UserModules, tmp_path: Path, source: str, attr: str, expected: str, where: str | None
) -> None:
    name = modules.write(source)
    host = host_for([f"{name}:{attr}"], lambda: SQLiteStore(tmp_path / "t.db"))
    with pytest.raises(HostError) as caught:
        host.start()
    message = str(caught.value)
    assert message.startswith(f"cannot load {name}:{attr}: ")
    assert expected in message
    if where is not None:
        assert f"{name}{where}" in message
    assert "Traceback" not in message and "\n" not in message


def test_missing_module_and_bad_specs_are_refused(tmp_path: Path) -> None:
    host = host_for(["no_such_module_here:worker"], lambda: SQLiteStore(tmp_path / "t.db"))
    with pytest.raises(HostError, match="no module named 'no_such_module_here'"):
        host.start()
    for bad in ("module", "a:b:c", "mod:", ":attr", "1mod:x"):
        with pytest.raises(HostError, match="expected MODULE:ATTR"):
            WorkerSpec.parse(bad)
    with pytest.raises(HostError, match="given twice"):
        host_for(["m:w", "m:w"], lambda: SQLiteStore(tmp_path / "t.db"))
    assert str(WorkerSpec.parse("pkg.jobs:app.worker")) == "pkg.jobs:app.worker"


async def test_a_worker_on_another_database_is_refused(
    modules: UserModules, tmp_path: Path
) -> None:
    other = tmp_path / "other.db"
    name = modules.write(
        "from engine import Worker, SQLiteStore\n"
        f"worker = Worker(SQLiteStore({str(other)!r}), ['q'])\n"
    )
    console_store = SQLiteStore(tmp_path / "console.db")
    host = host_for([f"{name}:worker"], lambda: SQLiteStore(tmp_path / "console.db"), console_store)
    with pytest.raises(HostError, match=r"its worker uses .*other\.db, but the console shows"):
        host.start()


async def test_factory_taking_the_target_gets_the_target_text(
    modules: UserModules, tmp_path: Path, hosts: list[WorkerHost]
) -> None:
    db = tmp_path / "target.db"
    name = modules.write(
        "from engine import Worker\n"
        "seen = []\n"
        "def make(target: str):\n"
        "    seen.append(target)\n"
        "    w = Worker.sqlite(target, queues=['default'])\n"
        "    w.register('noop', lambda ctx: None)\n"
        "    return w\n"
    )
    host = WorkerHost([f"{name}:make"], make_store=lambda: SQLiteStore(db), target_text=str(db))
    host.start()
    hosts.append(host)
    assert modules.module(name).seen == [str(db)]
    assert (await wait_state(host, "running")).handles == {"noop"}


async def test_hosted_reasons_say_what_the_worker_knows(
    modules: UserModules,
    make_store: Callable[[], TaskStore],
    client: CairnQ,
    hosts: list[WorkerHost],
) -> None:
    name = modules.write(
        GATED
        + """
def make_capped(store):
    w = make(store)
    w.register("capped", lambda ctx: None, concurrency=1)
    return w
"""
    )
    host = host_for([f"{name}:make_capped"], make_store)
    host.start()
    hosts.append(host)
    statuses = await host.statuses()
    assert hosted_reasons("other.job", "default", "queued", statuses) == [
        "no hosted worker handles 'other.job' on queue 'default'"
    ]
    assert hosted_reasons("noop", "elsewhere", "queued", statuses)[0].startswith("no hosted")
    assert hosted_reasons("noop", "default", "running", statuses) == []
    assert hosted_reasons("noop", "default", "queued", []) == []
    await host.workers[0].pause()
    paused = await wait_state(host, "paused")
    assert hosted_reasons("noop", "default", "queued", [paused]) == [
        f"hosted worker {name}:make_capped is paused"
    ]


async def test_a_blocked_hosted_loop_shows_as_a_stale_status(
    modules: UserModules, make_store: Callable[[], TaskStore], hosts: list[WorkerHost]
) -> None:
    name = modules.write(
        """
import threading, time
from engine import Worker

release = threading.Event()
blocking = threading.Event()

def make(store):
    w = Worker(store, ["default"], poll_interval_ms=20)

    @w.task("block")
    async def block(ctx):
        blocking.set()
        release.wait(5)  # holds the hosted loop, as a careless handler would

    return w
"""
    )
    host = host_for([f"{name}:make"], make_store)
    host.start()
    hosts.append(host)
    user = modules.module(name)
    async with CairnQ(make_store()) as client:
        await client.submit("block")
        await asyncio.to_thread(user.blocking.wait, 10)

        async def lagging() -> bool:
            status = await status_of(host)
            return status.stale and status.loop_lag_ms >= 100

        await eventually(lagging, what="a stale status while the handler blocks the loop")
        user.release.set()

    async def fresh() -> bool:
        return not (await status_of(host)).stale

    await eventually(fresh, what="a fresh status once the loop is free again")


async def test_shutdown_wakes_a_worker_waiting_out_a_long_poll(
    modules: UserModules, make_store: Callable[[], TaskStore], client: CairnQ
) -> None:
    """Quitting never waits for a hosted worker's next poll: the worker is woken.

    The worker polls once an hour and the shutdown's grace is an hour too, so a
    shutdown that waited for the poll (or ran out its grace and cancelled the
    worker) could not end within the test's deadline; one that wakes the worker
    ends as soon as the worker has stopped by itself and its store is closed.
    """
    name = modules.write(
        """
from engine import Worker

def make(store):
    w = Worker(store, ["default"], poll_interval_ms=3_600_000)

    @w.task("noop")
    async def noop(ctx):
        return "done"

    return w
"""
    )
    task = await client.submit("noop")  # claimed by the first poll, before the long wait
    host = host_for([f"{name}:make"], make_store, client.store)
    host.start()
    try:

        async def settled() -> bool:
            status = await client.get_status(task.id)
            return status is not None and status.status == "succeeded"

        await eventually(settled, what="the task of the first poll to succeed")
        polled = await wait_state(host, "running")
        assert polled.snapshot is not None and polled.snapshot.polls >= 1
        stopping = threading.Thread(target=host.shutdown, args=(3600.0,), daemon=True)
        stopping.start()
        await asyncio.to_thread(stopping.join, 60)  # a generous deadline, not a measurement
        assert not stopping.is_alive(), "shutdown waited for the hour-long poll"
        status = await status_of(host)
        assert status.state == "stopped" and status.error is None
        assert not host.workers[0]._thread.is_alive()
    finally:
        host.shutdown(1.0)
