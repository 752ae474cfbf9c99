"""Workers hosted in the console's process, each on its own event loop in its own thread.

Why a thread per worker: a worker draining a thousand tasks a second spends its
time in store round trips and settlement bookkeeping; on the console's loop that
would sit between every keypress and its repaint. On its own loop it only
competes for the GIL, which Python hands over every few milliseconds.

The loop lives as long as the hosted worker does, across restarts and reloads,
because a store's connections belong to the loop that opened them. Every
control runs on that loop (``run_coroutine_threadsafe``) and is awaitable from
any other loop; the console awaits them in its own workers.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Literal, TypeVar

from cairnq_tui.hosting._load import (
    HostError,
    WorkerSpec,
    build_worker,
    find_attribute,
    import_module,
)
from cairnq_tui.hosting._quit import left_running_line
from engine import TaskStore, Worker
from engine.snapshots import CallSnapshot, WorkerSnapshot

T = TypeVar("T")

HostState = Literal["starting", "running", "paused", "draining", "stopped", "failed"]

#: How long a status read waits for a busy hosted loop before showing the last one.
STATUS_TIMEOUT_S = 0.25
#: How long quitting waits for in-flight calls before abandoning them (their leases
#: then expire and recovery requeues them, as after a crash).
DEFAULT_GRACE_S = 3.0
_TICK_S = 0.1
#: How long a state change waits for the worker to take a control in before telling.
_CHANGE_WAIT_S = 0.2
_START_TIMEOUT_S = 60.0


@dataclass(frozen=True, slots=True)
class HostedStatus:
    """One hosted worker as the console shows it.

    ``loop_lag_ms`` is how late the hosted loop's 100 ms tick is: a handler that
    blocks its event loop (``time.sleep`` in an ``async def``) shows up here.
    ``stale`` marks a status that could not be refreshed because of such a block.
    ``changes`` counts the hosted worker's state changes so far: of two statuses,
    the one with more is the newer (a pushed change beats an older refresh).
    """

    spec: str
    state: HostState
    error: str | None
    snapshot: WorkerSnapshot | None
    loop_lag_ms: int
    loads: int
    stale: bool = False
    changes: int = 0

    @property
    def handles(self) -> frozenset[str]:
        """The task names the hosted worker has registered."""
        if self.snapshot is None:
            return frozenset()
        return frozenset(n.name for n in self.snapshot.names)


class HostedWorker:
    """One ``MODULE:ATTR`` worker, its thread and loop, and its controls.

    Args:
        spec: what to import.
        make_store: a new, unconnected store on the console's database (called
            on the hosted thread, for ATTR factories that take a store).
        target_text: the target path or DSN (for factories that take it).
        reference: the console's store; a hosted worker on another database is refused.
    """

    def __init__(
        self,
        spec: WorkerSpec,
        *,
        make_store: Callable[[], TaskStore],
        target_text: str,
        reference: TaskStore | None = None,
    ) -> None:
        self.spec = spec
        self._make_store = make_store
        self._target_text = target_text
        self._reference = reference
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, name=f"cairnq-host {spec}", daemon=True)
        self._worker: Worker | None = None
        self._run: asyncio.Task[None] | None = None
        self._error: str | None = None
        self._loads = 0
        self._last_tick = time.monotonic()
        self._control: asyncio.Lock | None = None
        self._last = HostedStatus(str(spec), "starting", None, None, 0, 0)
        #: Told each state change (on the hosted thread): see ``on_change``.
        self._listeners: list[Callable[[HostedStatus], object]] = []
        self._changes = 0
        #: The calls the last stop abandoned when its grace ran out (their tasks
        #: stay running until their leases end).
        self.left_running: tuple[CallSnapshot, ...] = ()

    # -- the hosted thread ------------------------------------------------------------

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.call_soon(self._tick)
        try:
            self._loop.run_forever()
        finally:
            with contextlib.suppress(RuntimeError):
                self._loop.run_until_complete(self._loop.shutdown_asyncgens())
            self._loop.close()

    def _tick(self) -> None:
        self._last_tick = time.monotonic()
        self._loop.call_later(_TICK_S, self._tick)

    def _lag_ms(self) -> int:
        return max(0, int((time.monotonic() - self._last_tick - _TICK_S) * 1000))

    def _submit(self, make: Callable[[], Awaitable[T]]) -> concurrent.futures.Future[T]:
        async def run() -> T:
            return await make()

        return asyncio.run_coroutine_threadsafe(run(), self._loop)

    async def _controlled(self, make: Callable[[], Awaitable[T]]) -> T:
        """Run ``make()`` on the hosted loop, one control at a time; await from any loop."""

        async def serialised() -> T:
            if self._control is None:
                self._control = asyncio.Lock()
            async with self._control:
                return await make()

        return await asyncio.wrap_future(self._submit(serialised))

    # -- on the hosted loop -------------------------------------------------------------

    async def _load(self, *, reload: bool) -> None:
        try:
            module = import_module(self.spec, reload=reload)
            worker = build_worker(self.spec, module, self._make_store, self._target_text)
            self._check_database(worker)
        except HostError as exc:
            self._error = str(exc)
            self._changed()
            raise
        self._worker = worker
        self._loads += 1
        self._error = None
        self._start()

    def _check_database(self, worker: Worker) -> None:
        reference = self._reference
        if reference is not None and worker.store.signals is not reference.signals:
            raise HostError(
                f"cannot host {self.spec}: its worker uses {worker.store.target}, but the "
                f"console shows {reference.target}; make {self.spec.attr!r} a function "
                "taking the store, so the console can pass its own database"
            )

    def _start(self) -> None:
        if self._worker is None or (self._run is not None and not self._run.done()):
            return
        self._run = self._loop.create_task(self._worker.run())
        self._run.add_done_callback(self._ran)
        self._changed()

    def _ran(self, run: asyncio.Task[None]) -> None:
        if not run.cancelled():
            exc = run.exception()
            if exc is not None:
                self._error = f"{self.spec} stopped: {type(exc).__name__}: {exc}"
        self._changed(settled=True)

    def _changed(self, *, settled: bool = False) -> None:
        """Tell the listeners the new state (a control was given, or the run ended).

        The worker takes a control in at its loop's next step (``pause`` sets a
        flag and wakes it), so unless the state is ``settled`` already (the run
        ended) it is read again a few loop turns later, until it differs from
        the state now or ``_CHANGE_WAIT_S`` has passed.
        """
        if self._listeners:
            until = time.monotonic() + (0.0 if settled else _CHANGE_WAIT_S)
            self._tell(self._status_now().state, until, 0)

    def _tell(self, before: HostState, until: float, turns: int) -> None:
        if self._status_now().state == before and time.monotonic() < until:
            if turns < 8:  # the next few loop turns, then every few ms
                self._loop.call_soon(self._tell, before, until, turns + 1)
            else:
                self._loop.call_later(0.005, self._tell, before, until, turns + 1)
            return
        self._changes += 1
        status = self._status_now()
        for listener in list(self._listeners):
            with contextlib.suppress(Exception):  # a listener's failure is its own
                listener(status)

    async def _stop(self, grace_s: float | None) -> None:
        run = self._run
        if self._worker is None or run is None or run.done():
            return  # stop() now would make the next run() return at once
        self._worker.stop()
        self._changed()  # draining
        try:
            await asyncio.wait_for(asyncio.shield(run), grace_s)
        except TimeoutError:
            # Grace is over: abandon what is still in flight (its leases expire).
            self.left_running = self._worker.snapshot().calls
            run.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await run
        except Exception:
            return  # the failure is recorded by _ran

    async def _unload(self, grace_s: float | None) -> None:
        await self._stop(grace_s)
        worker, self._worker = self._worker, None
        if worker is not None:
            with contextlib.suppress(Exception):
                await worker.store.close()

    def _status_now(self) -> HostedStatus:
        worker, run = self._worker, self._run
        snapshot = worker.snapshot() if worker is not None else None
        state: HostState
        if snapshot is None or run is None or run.done():
            state = "failed" if self._error is not None else "stopped"
        elif snapshot.state == "stopped":
            state = "starting"  # run() is still connecting its store
        else:
            state = snapshot.state
        self._last = HostedStatus(
            str(self.spec),
            state,
            self._error,
            snapshot,
            self._lag_ms(),
            self._loads,
            changes=self._changes,
        )
        return self._last

    def _require(self) -> Worker:
        if self._worker is None:
            raise HostError(f"{self.spec} is not loaded ({self._error or 'stopped'}); reload it")
        return self._worker

    # -- public controls (any thread / any loop) -----------------------------------------

    def on_change(self, listener: Callable[[HostedStatus], object]) -> Callable[[], None]:
        """Call ``listener(status)`` on every state change, as it happens; returns the
        call that stops it.

        The listener runs on the hosted thread, so it must only hand the status
        over (Textual's ``post_message`` is safe from any thread). Changes are
        told when a control takes effect (pause, resume, a drain starting, a
        start) and when the run ends (stopped, failed), without waiting for the
        console's next status read.
        """
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def start(self) -> None:
        """Start the thread, import the module and start the worker (blocking).

        Raises:
            HostError: the module cannot be loaded; the thread is stopped again.
        """
        self._thread.start()
        try:
            self._submit(lambda: self._load(reload=False)).result(_START_TIMEOUT_S)
        except BaseException:
            self.shutdown(0)
            raise

    async def status(self) -> HostedStatus:
        """The worker's state now; the last one (``stale``) if its loop does not answer soon."""
        answer: concurrent.futures.Future[HostedStatus] = concurrent.futures.Future()

        def fill() -> None:
            if not answer.set_running_or_notify_cancel():
                return
            try:
                answer.set_result(self._status_now())
            except BaseException as exc:
                answer.set_exception(exc)

        try:
            self._loop.call_soon_threadsafe(fill)
        except RuntimeError:  # the loop is closed: the worker was shut down
            return replace(self._last, state="stopped", snapshot=None)
        try:
            return await asyncio.wait_for(asyncio.wrap_future(answer), STATUS_TIMEOUT_S)
        except TimeoutError:
            return replace(self._last, loop_lag_ms=self._lag_ms(), stale=True)

    async def pause(self) -> None:
        """Stop claiming; calls in flight finish.

        Raises:
            HostError: the worker is not loaded.
        """

        async def pause() -> None:
            self._require().pause()
            self._changed()

        await self._controlled(pause)

    async def resume(self) -> None:
        """Claim again after ``pause``.

        Raises:
            HostError: the worker is not loaded.
        """

        async def resume() -> None:
            self._require().resume()
            self._changed()

        await self._controlled(resume)

    async def set_concurrency(self, concurrency: int) -> None:
        """Change how many calls may run at once (from the next poll).

        Raises:
            HostError: the worker is not loaded.
            ValueError: ``concurrency`` < 1.
        """

        async def change() -> None:
            self._require().set_concurrency(concurrency)

        await self._controlled(change)

    async def drain(self) -> None:
        """Stop claiming and return once every call in flight has finished.

        Raises:
            HostError: the worker is not loaded.
        """

        async def drain() -> None:
            self._require()
            await self._stop(None)

        await self._controlled(drain)

    async def restart(self) -> None:
        """Drain, then start the same worker again (paused stays paused).

        Raises:
            HostError: the worker is not loaded.
        """

        async def restart() -> None:
            self._require()
            await self._stop(None)
            self._error = None
            self._start()

        await self._controlled(restart)

    async def reload(self) -> None:
        """Drain, close its store, re-import the module and start the new worker.

        Raises:
            HostError: the module no longer loads; the worker stays stopped and
                the next ``reload`` tries again.
        """

        async def reload() -> None:
            await self._unload(None)
            await self._load(reload=True)

        await self._controlled(reload)

    def shutdown(self, grace_s: float = DEFAULT_GRACE_S) -> None:
        """Stop the worker (abandoning calls still running after ``grace_s``), close its
        store, and end the thread. Blocking; call it from outside the hosted loop."""
        if not self._thread.is_alive():
            return
        with contextlib.suppress(Exception):
            self._submit(lambda: self._unload(grace_s)).result(grace_s + 10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    async def close(self, grace_s: float = DEFAULT_GRACE_S) -> None:
        """``shutdown`` without blocking the calling loop."""
        await asyncio.to_thread(self.shutdown, grace_s)


class WorkerHost:
    """Every ``--worker`` of one console, all on the console's database.

    Args:
        specs: ``MODULE:ATTR`` texts (or parsed specs), each at most once.
        make_store / target_text / reference: as for ``HostedWorker``.

    Raises:
        HostError: a malformed or repeated spec.
    """

    def __init__(
        self,
        specs: Sequence[str | WorkerSpec],
        *,
        make_store: Callable[[], TaskStore],
        target_text: str,
        reference: TaskStore | None = None,
    ) -> None:
        parsed = [s if isinstance(s, WorkerSpec) else WorkerSpec.parse(s) for s in specs]
        seen: set[WorkerSpec] = set()
        for spec in parsed:
            if spec in seen:
                raise HostError(f"--worker {spec} is given twice")
            seen.add(spec)
        self.workers = tuple(
            HostedWorker(s, make_store=make_store, target_text=target_text, reference=reference)
            for s in parsed
        )

        self._grace_s = DEFAULT_GRACE_S

    def __bool__(self) -> bool:
        return bool(self.workers)

    def left_running_line(self) -> str | None:
        """After ``shutdown``: the line saying which calls it abandoned, or None."""
        calls = [c for w in self.workers for c in w.left_running]
        return left_running_line(calls, self._grace_s)

    def check(self) -> None:
        """Import every worker's module and find its attribute, starting nothing.

        The command line calls this before it opens (and maybe creates) the
        database, so a worker that cannot load leaves nothing behind.

        Raises:
            HostError: the first module that does not import or lacks its attribute.
        """
        for hosted in self.workers:
            find_attribute(hosted.spec, import_module(hosted.spec, reload=False))

    def start(self) -> None:
        """Load and start every worker (blocking); all or none.

        Raises:
            HostError: the first worker that cannot be loaded (the others are stopped).
        """
        started: list[HostedWorker] = []
        try:
            for hosted in self.workers:
                hosted.start()
                started.append(hosted)
        except BaseException:
            for hosted in started:
                hosted.shutdown(0)
            raise

    def get(self, spec: str) -> HostedWorker:
        """The hosted worker for ``spec`` text.

        Raises:
            KeyError: no such hosted worker.
        """
        for hosted in self.workers:
            if str(hosted.spec) == spec:
                return hosted
        raise KeyError(spec)

    def on_change(self, listener: Callable[[HostedStatus], object]) -> Callable[[], None]:
        """``HostedWorker.on_change`` for every hosted worker; returns the call that stops it."""
        stops = [w.on_change(listener) for w in self.workers]

        def stop() -> None:
            for each in stops:
                each()

        return stop

    async def statuses(self) -> list[HostedStatus]:
        """Every hosted worker's status, in ``--worker`` order."""
        return list(await asyncio.gather(*(w.status() for w in self.workers)))

    def shutdown(self, grace_s: float = DEFAULT_GRACE_S) -> None:
        """Shut every hosted worker down (blocking), all within about ``grace_s``."""
        self._grace_s = grace_s
        threads = [
            threading.Thread(target=w.shutdown, args=(grace_s,), daemon=True) for w in self.workers
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    async def close(self, grace_s: float = DEFAULT_GRACE_S) -> None:
        """``shutdown`` without blocking the calling loop."""
        await asyncio.to_thread(self.shutdown, grace_s)
