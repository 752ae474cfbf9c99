"""Methods that share another's keyword list, so a long list is written once.

``submit`` and ``submit_outcome`` take the same dozen keywords on the store and
on the client. Each list is declared in one place; the other methods take it
from there, for callers (``help()``, ``inspect.signature``) and for type
checkers (through ``ParamSpec``) alike:

* ``prepared_by(prepare)`` makes a method taking ``prepare``'s keywords out of
  a body taking what ``prepare`` returns (the store's ``submit_outcome`` takes
  ``_prepare_submit``'s keywords and is handed the ``NewTask``);
* ``task_of(outcome)`` makes ``submit`` out of ``submit_outcome``: the same
  keywords, answering the outcome's task. It calls ``submit_outcome`` on the
  instance, so a subclass overriding ``submit_outcome`` changes both.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar

from engine._models import SubmitOutcome, Task

S = TypeVar("S")
P = ParamSpec("P")
V = TypeVar("V")
R = TypeVar("R")


def _signature_of(keywords: Callable[..., Any], returns: Callable[..., Any]) -> inspect.Signature:
    """``keywords``' parameters with ``returns``' return annotation."""
    answer = inspect.signature(returns).return_annotation
    return inspect.signature(keywords).replace(return_annotation=answer)


def prepared_by(
    prepare: Callable[Concatenate[S, P], V],
) -> Callable[
    [Callable[[S, V], Coroutine[Any, Any, R]]], Callable[Concatenate[S, P], Coroutine[Any, Any, R]]
]:
    """Decorate ``body(self, prepared)`` into a method taking ``prepare``'s parameters.

    ``prepare(self, ...)`` runs inside the coroutine, so its errors are raised
    when the call is awaited, as from any ``async def``.
    """

    def decorate(
        body: Callable[[S, V], Coroutine[Any, Any, R]],
    ) -> Callable[Concatenate[S, P], Coroutine[Any, Any, R]]:
        @functools.wraps(body)
        async def method(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
            return await body(self, prepare(self, *args, **kwargs))

        method.__signature__ = _signature_of(prepare, body)  # type: ignore[attr-defined]
        return method

    return decorate


def task_of(
    outcome: Callable[Concatenate[S, P], Coroutine[Any, Any, SubmitOutcome]], doc: str
) -> Callable[Concatenate[S, P], Coroutine[Any, Any, Task]]:
    """``submit`` from ``submit_outcome``: the same parameters, the outcome's task; ``doc``
    is its docstring."""
    name = outcome.__name__

    async def submit(self: S, /, *args: P.args, **kwargs: P.kwargs) -> Task:
        done: SubmitOutcome = await getattr(self, name)(*args, **kwargs)
        return done.task

    submit.__signature__ = _signature_of(outcome, submit)  # type: ignore[attr-defined]
    submit.__qualname__ = outcome.__qualname__.removesuffix(name) + "submit"
    submit.__module__ = outcome.__module__
    submit.__doc__ = doc
    return submit
