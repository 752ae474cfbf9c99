"""Small asyncio helpers shared by the stores: answering a future, calling onto a loop.

Stores are used from several event loops at once (a worker on its own thread
beside a console), so an answer or a wakeup often has to reach a loop other
than the one running the code that produced it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def call_on_loop(loop: asyncio.AbstractEventLoop, fn: Callable[..., Any], *args: Any) -> None:
    """Run ``fn(*args)`` on ``loop``: at once when called on it, else scheduled there.

    Dropped when ``loop`` is closed: nothing waits on a closed loop.
    """
    try:
        running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        fn(*args)
        return
    with contextlib.suppress(RuntimeError):  # closed (perhaps just now)
        loop.call_soon_threadsafe(fn, *args)


def resolve(future: asyncio.Future[T], outcome: T | BaseException) -> None:
    """Give ``future`` its outcome (an exception is raised to the waiter).

    A future already done was cancelled by its caller; the outcome (a write
    that landed anyway) is then dropped.
    """
    if future.done():
        return
    if isinstance(outcome, BaseException):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)
