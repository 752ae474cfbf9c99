"""Two helpers around psycopg-pool's idle connections (the Postgres store's pool)."""

from __future__ import annotations

import select
from collections import deque
from typing import Any

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

Conn = AsyncConnection[dict[str, Any]]


class MostRecentFirst(deque[Conn]):
    """A pool's idle list that hands out the most recently returned connection.

    psycopg-pool takes idle connections from the left and returns them on the
    right, so sequential operations rotate through every pooled connection and
    each one prepares and plans every statement for itself. Returned on the left,
    the warm connection is reused and the others stay idle until ``max_idle``
    retires them (measured: purge batches ~45k -> ~65k rows/s with 10 pooled).
    """

    def append(self, conn: Conn) -> None:
        self.appendleft(conn)


def most_recent_first(pool: AsyncConnectionPool[Conn]) -> None:
    # A private attribute of psycopg-pool: only replaced when it is the plain
    # deque this was written against, so a changed pool merely loses the tweak.
    idle = getattr(pool, "_pool", None)
    if type(idle) is deque:
        pool._pool = MostRecentFirst(idle)


def terminated(conn: Conn) -> bool:
    """True if an idle pooled connection was most likely terminated.

    A backend killed by a restart or ``pg_terminate_backend`` sends its FATAL
    notice and closes the socket; an idle connection has nothing else to read,
    so a zero-timeout ``select`` tells without a round trip.
    """
    if conn.closed or conn.broken:
        return True
    readable, _, _ = select.select([conn.pgconn.socket], [], [], 0)
    return bool(readable)
