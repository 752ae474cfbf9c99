"""Where one ``call()`` spends its time on Postgres: the phases, from timestamps.

Bench-only tracing: nothing in the engine is changed. The store instances a
bench opens get their public entry points wrapped (``submit``, ``submit_outcome``, ``claim_wake``,
``claim_session``, ``claim_session_completing``, ``complete``, ``settle_alone``,
``get``, ``get_status``) to take ``time.monotonic_ns()`` stamps, the echo handler stamps
itself, and a separate LISTEN connection (the *spy*, on a thread of its own,
so the event loop's load does not delay it) stamps each NOTIFY as it arrives,
which is what any listener, the worker's or the waiter's, can hear at best.
``CLOCK_MONOTONIC`` is one clock for every process of the machine, so a worker
in another process stamps into a file and the stamps line up.

Per call, in order (a phase is the gap between two stamps):

- submit: ``call()`` entered -> the insert committed and ``submit`` returned;
- worker wake: submit returned -> the worker's ``claim_wake`` returned (in this
  process: the in-process signal; another process: NOTIFY through its
  listener); ``queued NOTIFY heard`` is the spy's arrival after the submit;
- claim: the worker's claim session (probe if any, transaction, COMMIT), from its
  start to its return, preceded by the gap from the wake to its start;
- to handler: claim returned -> the handler runs;
- settle: handler entered -> the settlement (``complete``, ``settle_alone``, or
  a completing claim carrying it) committed and returned;
- waiter wake: settle returned -> the waiter's read starts (or, when the done
  signal carried the row, ``call()`` returns); ``done NOTIFY heard`` is the
  spy's arrival after the settle;
- waiter read: ``get`` of the finished row, then ``call()`` returns.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

#: Environment variable naming the file a traced worker process appends to.
TRACE_FILE_ENV = "CAIRNQ_BENCH_TRACE_FILE"

PHASES: tuple[tuple[str, str, str], ...] = (
    ("submit (insert + COMMIT)", "t0", "submitted"),
    ("  queued NOTIFY heard (spy)", "submitted", "queued_heard"),
    ("worker wake (signal or NOTIFY)", "submitted", "woke"),
    ("wake -> claim starts", "woke", "claim_start"),
    ("claim session (probe if any, tx)", "claim_start", "claim_end"),
    ("claim -> handler runs", "claim_end", "handler"),
    ("handler -> settle committed", "handler", "settled"),
    ("  done NOTIFY heard (spy)", "settled", "done_heard"),
    ("waiter wake (-> read or return)", "settled", "waiter_woke"),
    ("waiter read (get)", "waiter_woke", "read_end"),
    ("read -> call() returns", "read_end", "end"),
)


def now() -> int:
    return time.monotonic_ns()


def _wrap(store: Any, name: str, before: Callable[..., None], after: Callable[..., None]) -> None:
    """Shadow ``store.name`` by an instance attribute calling the hooks around it."""
    original = getattr(store, name)

    @functools.wraps(original)
    async def traced(*args: Any, **kwargs: Any) -> Any:
        before(*args, **kwargs)
        result = await original(*args, **kwargs)
        after(result, *args, **kwargs)
        return result

    setattr(store, name, traced)


class WorkerStamps:
    """The worker's side of the stamps: wake, claim, handler, settle, per task id."""

    def __init__(self, sink: Callable[[dict[str, Any]], None]) -> None:
        self._sink = sink
        self._woke: int | None = None
        self._claim: tuple[int, int] | None = None
        self._claim_start = 0
        #: Claim sessions run, and how many of them claimed nothing.
        self.claims = 0
        self.empty_claims = 0
        self._open: dict[str, dict[str, Any]] = {}

    def attach(self, store: Any) -> None:
        def woke(*_: Any, **__: Any) -> None:
            self._woke = now()

        def claim_start(*_: Any, **__: Any) -> None:
            self._claim_start = now()

        def claim_end(result: Any, *_: Any, **__: Any) -> None:
            self._claim = (self._claim_start, now())
            self.claims += 1
            value = getattr(result, "value", result)  # a completing claim's plan value
            if value is None or not getattr(value, "calls", True):
                self.empty_claims += 1

        def settled(_: Any, *args: Any, **kwargs: Any) -> None:
            # complete(task_id=), settle_alone(settle), or a completing claim's
            # complete_ids= and settles=: whichever wrote the settlement.
            ids = [kwargs.get("task_id", ""), *kwargs.get("complete_ids", ())]
            ids += [s.task_id for s in (*args, *kwargs.get("settles", ())) if hasattr(s, "task_id")]
            at = now()
            for task_id in ids:
                stamps = self._open.pop(task_id, None)
                if stamps is not None:
                    stamps["settled"] = at
                    self._sink(stamps)

        _wrap(store, "claim_wake", lambda *a, **k: None, woke)
        for name in ("claim_session", "claim_session_completing"):
            _wrap(store, name, claim_start, claim_end)
        for name in ("complete", "settle_alone", "claim_session_completing"):
            _wrap(store, name, lambda *a, **k: None, settled)

    def handler(self, task_id: str) -> None:
        """The handler of ``task_id`` started: the claim that produced it is the last one."""
        at = now()
        start, end = self._claim if self._claim is not None else (at, at)
        woke = self._woke if self._woke is not None and self._woke <= start else start
        self._open[task_id] = {
            "id": task_id,
            "woke": woke,
            "claim_start": start,
            "claim_end": end,
            "handler": at,
            "claims": self.claims,
            "empty_claims": self.empty_claims,
        }


class Spy:
    """A LISTEN connection on its own thread: when each NOTIFY reached a listener."""

    def __init__(self, dsn: str) -> None:
        import psycopg

        self._conn = psycopg.connect(dsn, autocommit=True)
        self._conn.execute("listen cairnq_queued")
        self._conn.execute("listen cairnq_done")
        self.queued: list[int] = []
        self.done: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for note in self._conn.notifies(timeout=0.1):
                at = now()
                if note.channel == "cairnq_queued":
                    self.queued.append(at)
                else:
                    self.done.setdefault(note.payload, at)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self._conn.close()

    def queued_after(self, t: int) -> int | None:
        return next((q for q in self.queued if q >= t), None)


class CallerStamps:
    """The caller's side: call start, submit returned, the waiter's read, call end."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self._current: dict[str, Any] | None = None

    def attach(self, store: Any) -> None:
        def submitted(result: Any, *_: Any, **__: Any) -> None:
            if self._current is not None and "submitted" not in self._current:
                self._current["submitted"] = now()
                self._current["id"] = getattr(result, "task", result).id  # Task or SubmitOutcome

        def read_start(*_: Any, **__: Any) -> None:
            if self._current is not None:
                self._current.setdefault("waiter_woke", now())

        def read_end(*_: Any, **__: Any) -> None:
            if self._current is not None:
                self._current["read_end"] = now()

        for name in ("submit", "submit_outcome"):
            _wrap(store, name, lambda *a, **k: None, submitted)
        for name in ("get", "get_status"):
            _wrap(store, name, read_start, read_end)

    @contextlib.contextmanager
    def call(self) -> Iterator[None]:
        self._current = {"t0": now()}
        yield
        self._current["end"] = now()
        self.calls.append(self._current)
        self._current = None


def join(caller: CallerStamps, worker: dict[str, dict[str, Any]], spy: Spy) -> list[dict[str, int]]:
    """One dict of stamps per call, the caller's, the worker's and the spy's together."""
    out = []
    for stamps in caller.calls:
        row = dict(stamps)
        row.update(worker.get(row.get("id", ""), {}))
        if "id" in row and (heard := spy.done.get(row["id"])) is not None:
            row["done_heard"] = heard
        if (queued := spy.queued_after(row["t0"])) is not None:
            row["queued_heard"] = queued
        if "waiter_woke" not in row:  # the done signal carried the row: no read
            row["waiter_woke"] = row["read_end"] = row["end"]
        row.pop("id", None)
        out.append(row)
    return out


def phase_p50s(rows: list[dict[str, int]]) -> dict[str, float | None]:
    """p50 of each phase in ms (None when no call had both stamps), plus the total.

    Also the worker's claim sessions per call, and of them those that claimed
    nothing (a probe that said no, or a transaction that found nothing).
    """
    out: dict[str, float | None] = {}
    for label, a, b in (*PHASES, ("total (traced calls)", "t0", "end")):
        gaps = [(r[b] - r[a]) / 1e6 for r in rows if a in r and b in r]
        out[label] = statistics.median(gaps) if gaps else None
    counted = [r for r in rows if "claims" in r]
    if len(counted) > 1:
        span = len(counted) - 1
        first, last = counted[0], counted[-1]
        out["worker claim sessions per call"] = (last["claims"] - first["claims"]) / span
        out["  of which claimed nothing"] = (last["empty_claims"] - first["empty_claims"]) / span
    return out


def read_trace_file(path: str) -> dict[str, dict[str, Any]]:
    """A traced worker process's stamps, by task id."""
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return {(d := json.loads(line))["id"]: d for line in f if line.strip()}


def file_sink(path: str) -> Callable[[dict[str, Any]], None]:
    def sink(stamps: dict[str, Any]) -> None:
        with open(path, "a") as f:
            f.write(json.dumps(stamps) + "\n")

    return sink
