"""Small asyncio helpers shared by the stores: answering a future, calling onto a loop.

Stores are used from several event loops at once (a worker on its own thread
beside a console), so an answer or a wakeup often has to reach a loop other
than the one running the code that produced it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
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


#: Tasks ``run_to_exit`` left with their closed loop.
_LEFT_BEHIND: list[asyncio.Task[Any]] = []


def run_to_exit(main: Coroutine[Any, Any, None], *, grace_s: float) -> int:
    """``asyncio.run(main)``, except that tasks left behind cannot keep it from returning.

    ``asyncio.run`` cancels the tasks still pending when ``main`` returns and waits
    for every one of them, for ever if a task swallows its cancellation. Here they
    get ``grace_s`` seconds after the cancel; those still running then are left
    with the loop, which closes. Returns how many were left.
    """
    loop = asyncio.new_event_loop()
    try:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(main)
        return _cancel_left_over(loop, grace_s)
    finally:
        try:
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            asyncio.set_event_loop(None)
            loop.close()


def _cancel_left_over(loop: asyncio.AbstractEventLoop, grace_s: float) -> int:
    pending = asyncio.all_tasks(loop)
    if not pending:
        return 0
    for task in pending:
        task.cancel()
    _done, stuck = loop.run_until_complete(asyncio.wait(pending, timeout=grace_s))
    for task in pending - stuck:
        if not task.cancelled() and task.exception() is not None:
            loop.call_exception_handler(
                {
                    "message": "a task raised while the loop shut down",
                    "exception": task.exception(),
                    "task": task,
                }
            )
    # Held for the life of the process: collected, each would log that it was
    # destroyed while pending, which the caller has already said in its own words.
    _LEFT_BEHIND.extend(stuck)
    return len(stuck)
