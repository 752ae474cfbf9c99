"""Running scenario steps against a store (the scenario format: docs/protocol-notes.md).

Each op maps a step's arguments onto the store-level operation of the same name
and turns its answer into plain JSON-like data (tasks as dicts keyed by the
column names of ``cairnq_tasks``), so references and assertions see what the
other SDKs' runners see.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from engine._models import TASK_COLUMNS, Task, TaskRef
from engine.conformance._scenario import Scenario, ScenarioError, check_assertions, resolve
from engine.store._base import TaskStore

_STEP_KEYS = frozenset({"op", "args", "save", "expect", "expectError"})
_REQUIRED = object()


@dataclass(frozen=True, slots=True)
class ScenarioFailure:
    """Why a scenario failed: at which step (its index in ``steps``) and op."""

    scenario: str
    step: int | None
    op: str | None
    reason: str

    def line(self) -> str:
        """One line for the runner's report."""
        reason = " ".join(self.reason.split())
        if self.step is None:
            return f"FAIL {self.scenario}: {reason}"
        return f"FAIL {self.scenario} step {self.step} ({self.op}): {reason}"


def task_dict(task: Task | None) -> dict[str, Any] | None:
    """A task as the scenario format sees it: column name -> decoded value."""
    if task is None:
        return None
    return {column: getattr(task, column) for column in TASK_COLUMNS}


def _ref_dict(ref: TaskRef | None) -> dict[str, Any] | None:
    return None if ref is None else {"id": ref.id, "status": ref.status}


class _Args:
    """A step's resolved arguments, taken one by one so leftovers can be refused."""

    def __init__(self, op: str, args: Any) -> None:
        if not isinstance(args, dict):
            raise ScenarioError(f"{op}: 'args' must be an object")
        self._op = op
        self._args = dict(args)

    def take(self, name: str, default: Any = _REQUIRED, *, alias: str | None = None) -> Any:
        if name in self._args:
            return self._args.pop(name)
        if alias is not None and alias in self._args:
            return self._args.pop(alias)
        if default is _REQUIRED:
            raise ScenarioError(f"{self._op}: missing argument {name!r}")
        return default

    def done(self) -> None:
        # A misspelt argument would otherwise silently fall back to its default.
        if self._args:
            raise ScenarioError(f"{self._op}: unknown argument(s) {sorted(self._args)}")


Op = Callable[[TaskStore, _Args], Awaitable[Any]]


async def _submit(store: TaskStore, a: _Args) -> Any:
    kwargs = {
        "name": a.take("name"),
        "payload": a.take("payload", {}),
        "key": a.take("key", None),
        "queue": a.take("queue", "default"),
        "conflict": a.take("conflict", "reuse"),
        "max_attempts": a.take("max_attempts", 3),
        "priority": a.take("priority", 0),
        "metadata": a.take("metadata", None),
        "correlation_id": a.take("correlation_id", None),
        "delay_ms": a.take("run_at_delay_ms", 0, alias="delay_ms"),
    }
    a.done()
    return task_dict(await store.submit(**kwargs))


def _lookup(arg: str, method: str, shape: Callable[[Any], Any]) -> Op:
    """An op taking one argument (an id or a key) and returning one shaped result."""

    async def op(store: TaskStore, a: _Args) -> Any:
        value = a.take(arg)
        a.done()
        return shape(await getattr(store, method)(value))

    return op


async def _list(store: TaskStore, a: _Args) -> Any:
    filters = {
        name: a.take(name, None)
        for name in ("status", "queue", "name", "root_id", "correlation_id")
    }
    limit = a.take("limit", 100)
    offset = a.take("offset", 0)
    a.done()
    tasks = await store.list(**filters, limit=limit, offset=offset)
    return [task_dict(task) for task in tasks]


async def _retry(store: TaskStore, a: _Args) -> Any:
    task_id = a.take("id")
    reset = a.take("reset_attempt", False)
    a.done()
    return task_dict(await store.retry(task_id, reset_attempt=reset))


async def _retry_by_key(store: TaskStore, a: _Args) -> Any:
    key = a.take("key")
    reset = a.take("reset_attempt", False)
    a.done()
    return task_dict(await store.retry_by_key(key, reset_attempt=reset))


async def _purge(store: TaskStore, a: _Args) -> Any:
    kwargs = {
        "older_than_ms": a.take("older_than_ms", 0),
        "queue": a.take("queue", None),
        "status": a.take("status", None),
        "name": a.take("name", None),
        "limit": a.take("limit", 1000),
    }
    a.done()
    return list(await store.purge(**kwargs))


async def _stats(store: TaskStore, a: _Args) -> Any:
    queue = a.take("queue", None)
    a.done()
    return await store.stats(queue)


async def _queue_depth(store: TaskStore, a: _Args) -> Any:
    queue = a.take("queue")
    max_depth = a.take("max_depth")
    a.done()
    return await store.queue_depth(queue, max_depth)


async def _claim(store: TaskStore, a: _Args) -> Any:
    kwargs = {
        "queues": a.take("queues"),
        "worker_id": a.take("worker_id"),
        "lease_ms": a.take("lease_ms", 30_000),
        "limit": a.take("limit", 1),
        # Absent means no name filter; an explicit [] claims nothing.
        "names": a.take("names", None),
    }
    a.done()
    return [task_dict(task) for task in await store.claim(**kwargs)]


async def _heartbeat(store: TaskStore, a: _Args) -> Any:
    kwargs = {
        "task_id": a.take("id"),
        "worker_id": a.take("worker_id"),
        "lease_ms": a.take("lease_ms", 30_000),
    }
    a.done()
    return task_dict(await store.heartbeat(**kwargs))


async def _heartbeat_batch(store: TaskStore, a: _Args) -> Any:
    ids = a.take("ids")
    worker_id = a.take("worker_id")
    lease_ms = a.take("lease_ms", 30_000)
    a.done()
    if not isinstance(ids, list):
        raise ScenarioError("heartbeat_batch: 'ids' must be an array")
    held = await store.heartbeat_batch(task_ids=ids, worker_id=worker_id, lease_ms=lease_ms)
    # The statement's map, flattened in the order the ids were asked for.
    return [{"id": i, "cancel_requested": held[i]} for i in ids if i in held]


async def _progress(store: TaskStore, a: _Args) -> Any:
    kwargs = {
        "task_id": a.take("id"),
        "worker_id": a.take("worker_id"),
        "progress": a.take("progress", None),
        "message": a.take("message", None),
    }
    a.done()
    return task_dict(await store.progress(**kwargs))


async def _succeed(store: TaskStore, a: _Args) -> Any:
    task_id, worker_id, result = a.take("id"), a.take("worker_id"), a.take("result", None)
    a.done()
    return task_dict(await store.succeed(task_id=task_id, worker_id=worker_id, result=result))


async def _complete(store: TaskStore, a: _Args) -> Any:
    task_id, worker_id, result = a.take("id"), a.take("worker_id"), a.take("result", None)
    a.done()
    return task_dict(await store.complete(task_id=task_id, worker_id=worker_id, result=result))


async def _fail(store: TaskStore, a: _Args) -> Any:
    kwargs = {
        "task_id": a.take("id"),
        "worker_id": a.take("worker_id"),
        "error": a.take("error"),
        "retryable": a.take("retryable", True),
        "delay_ms": a.take("delay_ms", 0),
    }
    a.done()
    return task_dict(await store.fail(**kwargs))


async def _sleep(store: TaskStore, a: _Args) -> Any:
    ms = a.take("ms")
    a.done()
    if isinstance(ms, bool) or not isinstance(ms, int | float) or ms < 0:
        raise ScenarioError(f"sleep: 'ms' must be a non-negative number, got {ms!r}")
    await asyncio.sleep(ms / 1000)
    return None


OPS: Mapping[str, Op] = {
    "submit": _submit,
    "get": _lookup("id", "get", task_dict),
    "get_by_key": _lookup("key", "get_by_key", task_dict),
    "get_status": _lookup("id", "get_status", _ref_dict),
    "get_status_by_key": _lookup("key", "get_status_by_key", _ref_dict),
    "list": _list,
    "cancel": _lookup("id", "cancel", task_dict),
    "cancel_by_key": _lookup("key", "cancel_by_key", task_dict),
    "retry": _retry,
    "retry_by_key": _retry_by_key,
    "purge": _purge,
    "stats": _stats,
    "queue_depth": _queue_depth,
    "claim": _claim,
    "heartbeat": _heartbeat,
    "heartbeat_batch": _heartbeat_batch,
    "progress": _progress,
    "succeed": _succeed,
    "complete": _complete,
    "fail": _fail,
    "sleep": _sleep,
}


async def _run_step(store: TaskStore, step: Mapping[str, Any], saved: dict[str, Any]) -> None:
    op = step["op"]
    if op == "expect":
        if "target" not in step:
            raise ScenarioError("expect: missing 'target'")
        assertions = {k: v for k, v in step.items() if k not in ("op", "target")}
        check_assertions(resolve(step["target"], saved), assertions, saved)
        return
    unknown = set(step) - _STEP_KEYS
    if unknown:
        raise ScenarioError(f"unknown step key(s) {sorted(unknown)}")
    handler = OPS.get(op)
    if handler is None:
        raise ScenarioError(f"unknown op {op!r}")
    args = _Args(op, resolve(step.get("args", {}), saved))
    expected_error = step.get("expectError")
    try:
        result = await handler(store, args)
    except ScenarioError:
        raise
    except Exception as exc:
        kind = type(exc).__name__
        if expected_error is None:
            raise ScenarioError(f"raised {kind}: {exc}") from exc
        if kind != expected_error:
            raise ScenarioError(f"expected {expected_error}, raised {kind}: {exc}") from exc
        if "save" in step:
            saved[step["save"]] = {"task_id": getattr(exc, "task_id", None), "type": kind}
        return
    if expected_error is not None:
        raise ScenarioError(f"expected {expected_error}, but the op succeeded")
    if "save" in step:
        saved[step["save"]] = result
    if "expect" in step:
        if not isinstance(step["expect"], dict):
            raise ScenarioError("'expect' must be an object")
        check_assertions(result, step["expect"], saved)


async def run_scenario(scenario: Scenario, store: TaskStore) -> ScenarioFailure | None:
    """Run every step of ``scenario`` on a connected, empty ``store``.

    Returns:
        None when every step passed, else the first failure.
    """
    saved: dict[str, Any] = {}
    for index, step in enumerate(scenario.steps):
        try:
            await _run_step(store, step, saved)
        except ScenarioError as exc:
            return ScenarioFailure(scenario.name, index, str(step.get("op")), str(exc))
    return None
