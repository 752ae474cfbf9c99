"""Wakeups from other connections' commits on Postgres: LISTEN, fed into ``Signals``.

The Postgres counterpart of ``_sqlite_commits``: LISTEN on ``cairnq_queued`` /
``cairnq_done`` (the protocol's triggers NOTIFY on commit).

One dedicated connection outside the pool (a pooled connection would be handed
to other operations between notifications). It LISTENs to a channel only once
this process wants its signals (``Signals.on_wanted``): a process that only
claims never wakes for completions, one that only submits and waits never
wakes for its own submits' echoes. When a channel's LISTEN takes effect,
waiters of its kind look again (``Signals.heard_from_now``): what was sent
before it was missed. Notifications sent by this
process's own pooled connections are dropped (``Signals.is_own_writer``): the
store signalled those commits in-process already, with the row, and an echo
would only wake a waiter early to read what it is about to be handed, or
leave a pending claim wake behind. Notifications only shorten sleeps,
so the listener never blocks anything: when its connection drops it releases
every waiter (they fall back to polling) and reconnects with backoff; when the
server refuses LISTEN (a transaction-mode pooler, say) it stops for good.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import Any

import psycopg

from engine.store._signals import SignalKind, Signals

QUEUED_CHANNEL = "cairnq_queued"
DONE_CHANNEL = "cairnq_done"
#: LISTEN takes no parameter: each statement written out whole (the channels above).
_LISTEN: dict[SignalKind, str] = {"queued": "listen cairnq_queued", "done": "listen cairnq_done"}
_FIRST_BACKOFF_S = 1.0
_MAX_BACKOFF_S = 30.0

log = logging.getLogger(__name__)


class CommitWatch:
    """Another connection's commits, heard through one LISTEN connection of the store."""

    def __init__(self, conninfo: str, kwargs: Mapping[str, Any], signals: Signals) -> None:
        self._conninfo = conninfo
        self._kwargs = dict(kwargs)
        self._signals = signals
        self._task: asyncio.Task[None] | None = None
        #: Backend pid of the live LISTEN connection (None while reconnecting);
        #: tests use it to kill exactly this connection.
        self.backend_pid: int | None = None
        #: True once the server refused LISTEN: polling only from then on.
        self.refused = False
        #: The kinds whose channel the live connection LISTENs to (tests read it).
        self.listening: set[SignalKind] = set()
        self._more_wanted: asyncio.Event | None = None
        self._unsubscribe: Callable[[], None] | None = None

    def start(self) -> None:
        if self._task is None:
            loop = asyncio.get_running_loop()
            more = self._more_wanted = asyncio.Event()

            def wanted(kind: SignalKind) -> None:  # from any thread
                with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                    loop.call_soon_threadsafe(more.set)

            self._unsubscribe = self._signals.on_wanted(wanted)
            self._task = asyncio.create_task(self._run(), name="cairnq-pg-listener")

    async def stop(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self.backend_pid = None

    async def _run(self) -> None:
        backoff = _FIRST_BACKOFF_S
        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(
                    self._conninfo, autocommit=True, **self._kwargs
                )
            except psycopg.OperationalError as exc:
                log.debug("listener connect failed: %s", exc)
            else:
                try:
                    if not await self._listen(conn):
                        return
                    backoff = _FIRST_BACKOFF_S
                    await self._pump(conn)
                except psycopg.OperationalError as exc:
                    log.debug("listener connection lost: %s", exc)
                finally:
                    self.backend_pid = None
                    self.listening = set()
                    with contextlib.suppress(Exception):
                        await conn.close()
            # Whatever a waiter was waiting for may have been announced while we
            # were deaf: wake everyone so they poll now instead of at timeout.
            self._signals.release_all()
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, _MAX_BACKOFF_S)

    async def _listen(self, conn: psycopg.AsyncConnection[Any]) -> bool:
        """LISTEN to every wanted channel not yet listened to; False if the server refuses.

        Notifications the server sends while a LISTEN runs are read by psycopg,
        which hands them to the notify handler set here for that moment.
        """
        assert self._more_wanted is not None
        self._more_wanted.clear()
        new = sorted(self._signals.wanted - self.listening)
        if not new:
            self.backend_pid = conn.info.backend_pid
            return True
        conn.add_notify_handler(self._heard_in_command)
        try:
            for kind in new:
                await conn.execute(_LISTEN[kind])
                self.listening.add(kind)
        except psycopg.OperationalError:
            raise
        except psycopg.Error as exc:
            log.warning("LISTEN refused (%s); wakeups fall back to polling", exc)
            self.refused = True
            return False
        finally:
            conn.remove_notify_handler(self._heard_in_command)
        self.backend_pid = conn.info.backend_pid
        for kind in new:
            self._signals.heard_from_now(kind)
        return True

    def _heard_in_command(self, note: psycopg.Notify) -> None:
        self._deliver(note.channel, note.payload, note.pid)

    def _deliver(self, channel: str, payload: str, backend_pid: int) -> None:
        if self._signals.is_own_writer(backend_pid):
            return  # this process's commit: the hub heard of it already
        if channel == QUEUED_CHANNEL:
            self._signals.queued(payload)
        elif channel == DONE_CHANNEL:
            self._signals.done(payload)

    async def _pump(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """Feed notifications to the hub until the connection drops (then raise).

        Reads the socket from a plain reader callback: every notification that
        arrived is handled in one pass, with no timer or reader registered and
        dropped per notification as ``conn.notifies()`` does. The reader is set
        aside while a newly wanted channel's LISTEN runs on the connection.
        """
        loop = asyncio.get_running_loop()
        pgconn = conn.pgconn
        encoding = conn.info.encoding
        fd = pgconn.socket
        ended: asyncio.Future[None] = loop.create_future()
        more = self._more_wanted
        assert more is not None

        def readable() -> None:
            try:
                pgconn.consume_input()
                while (note := pgconn.notifies()) is not None:
                    self._deliver(
                        note.relname.decode(encoding), note.extra.decode(encoding), note.be_pid
                    )
            except psycopg.OperationalError as exc:
                if not ended.done():
                    ended.set_exception(exc)
                return
            if pgconn.status != psycopg.pq.ConnStatus.OK and not ended.done():
                ended.set_exception(psycopg.OperationalError("listener connection closed"))

        while True:
            loop.add_reader(fd, readable)
            try:
                readable()  # anything that arrived with the LISTEN replies
                asked = asyncio.ensure_future(more.wait())
                try:
                    await asyncio.wait((ended, asked), return_when=asyncio.FIRST_COMPLETED)
                finally:
                    asked.cancel()
                if ended.done():
                    ended.result()  # raises what ended it
                    return
            finally:
                loop.remove_reader(fd)
            if not await self._listen(conn):
                return
