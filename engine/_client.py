"""``CairnQ``, the API-side handle: submit, read, manage, wait, call, watch.

A thin layer over a ``TaskStore``: the backpressure gate and the in-process
wakeups live on the store (so every submit path and every waiter share them);
this handle adds the SDK-shaped methods, waits that record themselves in the
process-wide wait registry, ``watch`` and the retention sweeper.
"""

from __future__ import annotations

import asyncio
import builtins
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from engine._errors import TaskCanceled, TaskFailed
from engine._gate import QueueGate
from engine._models import Conflict, SubmitOutcome, Task, TaskDef, TaskRef
from engine._retention import Retention, RetentionSweeper
from engine._signatures import task_of
from engine._waits import DEFAULT_MAX_POLL_MS, DEFAULT_POLL_MS, DEFAULT_TIMEOUT_MS, wait_for_task
from engine.store._signals import WatchSignal

if TYPE_CHECKING:
    from engine.store._base import TaskStore
    from engine.store.sqlite import Synchronous


class CairnQ:
    """The API-side handle over one store.

    Args:
        store: the database.
        max_queue_depth: a backpressure limit for every queue (int) or for the
            named queues (mapping), installed on the store so child submits from
            handlers are gated too.
        max_queue_wait_ms: how long a gated submit waits before ``QueueFull``.
        retention: an int (ms, every terminal row) or a ``Retention``; the
            sweeper starts on connect and stops on close.

    Raises:
        ValueError: a bad gate limit or retention policy.
    """

    def __init__(
        self,
        store: TaskStore,
        *,
        max_queue_depth: int | Mapping[str, int] | None = None,
        max_queue_wait_ms: int = 600_000,
        retention: int | Retention | None = None,
    ) -> None:
        self._store = store
        if max_queue_depth is not None:
            store._set_queue_gate(QueueGate(max_queue_depth, max_queue_wait_ms))
        if retention is None:
            self._sweeper: RetentionSweeper | None = None
        else:
            if isinstance(retention, bool) or not isinstance(retention, int | Retention):
                raise ValueError(f"retention must be an int (ms) or a Retention, got {retention!r}")
            policy = retention if isinstance(retention, Retention) else Retention(retention)
            self._sweeper = RetentionSweeper(store, policy)
        self._connected = False

    @classmethod
    def sqlite(
        cls,
        path: str,
        *,
        busy_timeout_ms: int = 5_000,
        synchronous: Synchronous = "full",
        **kwargs: Any,
    ) -> CairnQ:
        """A handle on a SQLite file (created and migrated on connect).

        ``synchronous="normal"`` trades durability for speed: an OS crash or
        power loss can drop acknowledged commits (see ``SQLiteStore``).
        """
        from engine.store.sqlite import SQLiteStore

        store = SQLiteStore(path, busy_timeout_ms=busy_timeout_ms, synchronous=synchronous)
        return cls(store, **kwargs)

    @classmethod
    def postgres(
        cls,
        dsn: str,
        *,
        min_size: int = 1,
        max_size: int = 10,
        schema: str | None = None,
        **kwargs: Any,
    ) -> CairnQ:
        """A handle on a Postgres database (``schema`` names where the tables live)."""
        from engine.store.postgres import PostgresStore

        return cls(
            PostgresStore(dsn, min_size=min_size, max_size=max_size, schema=schema), **kwargs
        )

    @property
    def store(self) -> TaskStore:
        return self._store

    # -- lifecycle -------------------------------------------------------------------

    async def connect(self) -> None:
        """Connect (and migrate) the store, then start the retention sweeper; safe to repeat."""
        await self._store.connect()
        if self._sweeper is not None:
            self._sweeper.start()
        self._connected = True

    async def close(self) -> None:
        """End retention first (a sweep under way finishes its batch), then close the store."""
        if self._sweeper is not None:
            await self._sweeper.stop()
        self._connected = False
        await self._store.close()

    async def __aenter__(self) -> CairnQ:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _ready(self) -> TaskStore:
        if not self._connected:
            await self.connect()
        return self._store

    # -- writes --------------------------------------------------------------------------

    async def submit_outcome(
        self,
        name: str | TaskDef[Any, Any],
        payload: Any = None,
        *,
        key: str | None = None,
        queue: str = "default",
        conflict: Conflict = "reuse",
        max_attempts: int = 3,
        priority: int = 0,
        metadata: Mapping[str, Any] | None = None,
        delay_ms: int = 0,
        parent_id: str | None = None,
        root_id: str | None = None,
        correlation_id: str | None = None,
    ) -> SubmitOutcome:
        """Enqueue a task, or resolve a keyed submit by ``conflict``, saying what it
        did (beyond the SDK; ``submit`` answers the task alone).

        The strategies are tabled in docs/protocol-notes.md, "Submit and keys".

        Returns:
            The task, and whether it was ``"created"``, ``"reused"`` (the key's
            task, nothing written) or ``"replaced"`` (new, the key moved from
            ``previous``, canceled if it was live).

        Raises:
            ValueError / SerializationError: bad input (nothing written).
            AlreadyExists: ``conflict="reject"`` and the key holds a task (its
                ``task_id`` and ``status`` say which).
            QueueFull: the backpressure gate gave up.
        """
        store = await self._ready()
        return await store.submit_outcome(
            name=name.name if isinstance(name, TaskDef) else name,
            payload=payload,
            queue=queue,
            key=key,
            conflict=conflict,
            max_attempts=max_attempts,
            priority=priority,
            metadata=metadata,
            parent_id=parent_id,
            root_id=root_id,
            correlation_id=correlation_id,
            delay_ms=delay_ms,
        )

    submit = task_of(
        submit_outcome,
        """Enqueue a task, or resolve a keyed submit by ``conflict``.

        The strategies are tabled in docs/protocol-notes.md, "Submit and keys";
        ``submit_outcome`` also says what the submit did.

        Raises:
            ValueError / SerializationError: bad input (nothing written).
            AlreadyExists: ``conflict="reject"`` and the key holds a task.
            QueueFull: the backpressure gate gave up.
        """,
    )

    async def cancel(self, task_id: str) -> Task | None:
        """Cancel a live task; None for a terminal or unknown one."""
        return await (await self._ready()).cancel(task_id)

    async def cancel_by_key(self, key: str) -> Task | None:
        return await (await self._ready()).cancel_by_key(key)

    async def retry(self, task_id: str, *, reset_attempt: bool = False) -> Task | None:
        """Requeue a failed or canceled task; None otherwise."""
        return await (await self._ready()).retry(task_id, reset_attempt=reset_attempt)

    async def retry_by_key(self, key: str, *, reset_attempt: bool = False) -> Task | None:
        return await (await self._ready()).retry_by_key(key, reset_attempt=reset_attempt)

    async def run_now(self, task_id: str) -> Task:
        """Make a queued task due now (ours, beyond the SDK); NotQueued otherwise."""
        return await (await self._ready()).run_now(task_id)

    async def delay(self, task_id: str, delay_ms: int) -> Task:
        """Push a queued task back by ``delay_ms`` (ours, beyond the SDK); NotQueued otherwise."""
        return await (await self._ready()).delay(task_id, delay_ms)

    async def purge(
        self,
        *,
        older_than_ms: int = 0,
        queue: str | None = None,
        status: str | None = None,
        name: str | None = None,
        limit: int = 1_000,
    ) -> builtins.list[str]:
        """Delete finished tasks older than ``older_than_ms`` (at most ``limit``); their ids."""
        return await (await self._ready()).purge(
            older_than_ms=older_than_ms, queue=queue, status=status, name=name, limit=limit
        )

    async def purge_ids(self, ids: builtins.list[str]) -> builtins.list[str]:
        """Delete the listed tasks that are finished (ours, beyond the SDK); the ids deleted.

        A task that is queued or running, or not there, is left alone.
        """
        return await (await self._ready()).purge_ids(ids)

    # -- reads ----------------------------------------------------------------------------

    async def get(self, task_id: str) -> Task | None:
        return await (await self._ready()).get(task_id)

    async def get_by_key(self, key: str) -> Task | None:
        return await (await self._ready()).get_by_key(key)

    async def get_status(self, task_id: str) -> TaskRef | None:
        return await (await self._ready()).get_status(task_id)

    async def get_status_by_key(self, key: str) -> TaskRef | None:
        return await (await self._ready()).get_status_by_key(key)

    async def list(
        self,
        *,
        status: str | None = None,
        queue: str | None = None,
        name: str | None = None,
        root_id: str | None = None,
        correlation_id: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> builtins.list[Task]:
        """Tasks matching every given filter, newest first."""
        return await (await self._ready()).list(
            status=status,
            queue=queue,
            name=name,
            root_id=root_id,
            correlation_id=correlation_id,
            limit=limit,
            offset=offset,
        )

    async def stats(self, queue: str | None = None) -> dict[str, dict[str, int]]:
        """``{queue: {status: count}}``, zero-filled."""
        return await (await self._ready()).stats(queue)

    async def queue_depth(self, queue: str, max_depth: int) -> int:
        """How many more queued tasks fit under ``max_depth`` (the headroom, not the depth)."""
        return await (await self._ready()).queue_depth(queue, max_depth)

    # -- waits ------------------------------------------------------------------------------

    async def wait(
        self,
        task_id: str,
        *,
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
        poll_ms: int = DEFAULT_POLL_MS,
        max_poll_ms: int = DEFAULT_MAX_POLL_MS,
    ) -> Task:
        """Wait until the task is terminal and return it (any terminal status).

        Completions in this process (and Postgres notifications) end each sleep
        early; polling with growing intervals is the fallback.

        Raises:
            TaskTimeout: the deadline passed; the message says what the task was
                doing (never claimed, queued until, cancel pending, running).
        """
        return await wait_for_task(
            await self._ready(),
            kind="wait",
            task_id=task_id,
            timeout_ms=timeout_ms,
            poll_ms=poll_ms,
            max_poll_ms=max_poll_ms,
        )

    async def wait_by_key(
        self,
        key: str,
        *,
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
        poll_ms: int = DEFAULT_POLL_MS,
        max_poll_ms: int = DEFAULT_MAX_POLL_MS,
    ) -> Task:
        """Wait for whatever ``key`` points at to finish, re-resolving it every beat.

        A ``replace`` moves the wait onto the new task; a key that resolves to
        nothing yet is waited for.

        Raises:
            TaskTimeout: the deadline passed.
        """
        return await wait_for_task(
            await self._ready(),
            kind="wait_by_key",
            key=key,
            timeout_ms=timeout_ms,
            poll_ms=poll_ms,
            max_poll_ms=max_poll_ms,
        )

    async def call(
        self,
        name: str | TaskDef[Any, Any],
        payload: Any = None,
        *,
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
        poll_ms: int = DEFAULT_POLL_MS,
        max_poll_ms: int = DEFAULT_MAX_POLL_MS,
        **submit_kwargs: Any,
    ) -> Any:
        """Submit and wait; the task's result.

        Raises:
            TaskFailed: the task failed (carries its error envelope).
            TaskCanceled: the task was canceled.
            TaskTimeout: the deadline passed (the task keeps going).
        """
        task = await self.submit(name, payload, **submit_kwargs)
        done = await wait_for_task(
            self._store,
            kind="call",
            task_id=task.id,
            timeout_ms=timeout_ms,
            poll_ms=poll_ms,
            max_poll_ms=max_poll_ms,
            known=task,
        )
        if done.status == "succeeded":
            return done.result
        if done.status == "canceled":
            raise TaskCanceled(done.id)
        raise TaskFailed(done.error)

    # -- watch ------------------------------------------------------------------------------

    def watch(
        self,
        on_signal: Callable[[WatchSignal], Any],
        *,
        queues: Sequence[str] | None = None,
        poll_ms: int = 2_000,
    ) -> Callable[[], None]:
        """Call ``on_signal`` on "queued" (for ``queues``, all when None), "done" and
        a "poll" tick every ``poll_ms``; returns the function that unsubscribes.

        "queued" and "done" are seen for writes made in this process, and on
        Postgres for every process's writes (LISTEN/NOTIFY); the periodic "poll"
        is there for changes neither reports. Whatever ``on_signal`` raises is
        dropped. Call it with an event loop running: the ticks run there, and
        signals from other threads are handed to that loop. Once the returned
        function has returned, ``on_signal`` is not called again.

        Raises:
            ValueError: ``poll_ms`` < 1 or a bad queue list.
        """
        if isinstance(poll_ms, bool) or not isinstance(poll_ms, int) or poll_ms < 1:
            raise ValueError(f"poll_ms must be an integer >= 1, got {poll_ms!r}")
        if queues is not None and (isinstance(queues, str) or not isinstance(queues, Sequence)):
            raise ValueError("queues must be a list of queue names or None")
        watcher = _Watcher(on_signal, None if queues is None else frozenset(queues), poll_ms)
        return watcher.start(self._store)


class _Watcher:
    """One ``CairnQ.watch`` subscription.

    The store's hub may publish from any thread (a worker running its own loop);
    every signal is handed to ``consumer`` on the loop that subscribed.

    Handing over and stopping share one lock, so once ``_stop`` returns no
    consumer call is running (unless the consumer itself is stopping, which the
    re-entrant lock allows) and none starts later, whatever was already queued
    on the loop: a tick that had woken up, a signal sent over from a thread.
    """

    __slots__ = (
        "_active",
        "_consumer",
        "_detach",
        "_home",
        "_lock",
        "_poll_ms",
        "_queues",
        "_ticker",
    )

    def __init__(
        self,
        consumer: Callable[[WatchSignal], Any],
        queues: frozenset[str] | None,
        poll_ms: int,
    ) -> None:
        self._consumer = consumer
        self._queues = queues
        self._poll_ms = poll_ms
        self._home = asyncio.get_running_loop()
        self._detach: Callable[[], None] | None = None
        self._ticker: asyncio.Task[None] | None = None
        self._lock = threading.RLock()
        self._active = True

    def start(self, store: TaskStore) -> Callable[[], None]:
        self._detach = store.watch(self._offer)
        self._ticker = self._home.create_task(self._tick())
        return self._stop

    def _offer(self, sig: WatchSignal) -> None:
        if sig.reason == "queued" and self._queues is not None and sig.queue not in self._queues:
            return
        try:
            here = asyncio.get_running_loop() is self._home
        except RuntimeError:
            here = False
        if here:
            self._hand_over(sig)
        elif not self._home.is_closed():
            self._home.call_soon_threadsafe(self._hand_over, sig)

    def _hand_over(self, sig: WatchSignal) -> None:
        with self._lock:
            if not self._active:
                return
            try:
                self._consumer(sig)
            except Exception:
                return  # the consumer's own failure never reaches the publisher

    async def _tick(self) -> None:
        period_s = self._poll_ms / 1000
        while True:
            await asyncio.sleep(period_s)
            self._hand_over(WatchSignal("poll"))

    def _stop(self) -> None:
        with self._lock:
            self._active = False
        if self._detach is not None:
            self._detach()
        ticker = self._ticker
        if ticker is not None and not self._home.is_closed():
            self._home.call_soon_threadsafe(ticker.cancel)
