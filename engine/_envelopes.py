"""Error envelopes the engine records, and text made fit to record.

The envelope's fields are described in docs/protocol-notes.md, "Error envelopes".

Every failure the worker or a handler's context writes is built here, so the
field names and codes live in one place. Before an envelope or a progress
message goes to the store, ``legible`` rewrites any text UTF-8 cannot carry:
a lone surrogate such as ``"\\ud800"`` becomes the six visible characters
``\\ud800`` (Python's ``backslashreplace``). The record then keeps a trace of
what the handler said, and the failure is written with its own retry rule
instead of being lost to an encoding error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine._errors import TaskError

Envelope = dict[str, Any]


def _legible_text(text: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def legible(value: Any) -> Any:
    """``value`` with every string (and string key) made encodable as UTF-8.

    Dicts, lists and tuples are rebuilt only where something changed; any other
    value is returned as it is (the store still refuses what JSON cannot hold).
    """
    if isinstance(value, str):
        return _legible_text(value)
    if isinstance(value, Mapping):
        return {
            (_legible_text(k) if isinstance(k, str) else k): legible(v) for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [legible(item) for item in value]
    return value


def _record(type_: str, code: str, message: str, retryable: bool, details: Any = None) -> Envelope:
    envelope: Envelope = legible(
        {
            "type": type_,
            "code": code,
            "message": message,
            "retryable": retryable,
            "details": {} if details is None else details,
        }
    )
    return envelope


def handler_raised(exc: BaseException, retryable: bool = True) -> Envelope:
    """An ordinary exception from a handler: named after its class, ``handler_error``."""
    return _record(type(exc).__name__, "handler_error", str(exc), retryable)


def task_error(exc: TaskError) -> Envelope:
    """A ``TaskError``'s own type, code, message, flag and details."""
    return _record(exc.type, exc.code, exc.message, exc.retryable, exc.details)


def handler_timed_out(name: str, max_run_ms: int) -> Envelope:
    """The call ran past ``max_run_ms`` and was given up (retryable)."""
    return _record(
        "HandlerTimeout",
        "handler_timeout",
        f"{name!r} did not return within max_run_ms={max_run_ms}; this attempt was given up",
        True,
    )


def no_handler(name: str) -> Envelope:
    """A claimed task whose name this worker has no handler for (permanent)."""
    return _record("NoHandler", "no_handler", f"no handler registered for {name!r}", False)


def unserializable_result(exc: BaseException) -> Envelope:
    """A handler returned a value with no JSON form (permanent)."""
    return _record(
        "SerializationError",
        "unserializable_result",
        f"handler result is not JSON-serializable: {exc}",
        False,
    )


def for_fail(error: object, retryable: bool) -> tuple[Envelope, bool]:
    """What ``ctx.fail(error, retryable=...)`` records, and whether it may retry.

    A mapping is an envelope already (missing fields get their defaults and
    ``retryable`` wins over its own flag); a ``TaskError`` carries its own
    flag; another exception is a ``handler_error``; anything else is the
    reason text of a plain ``TaskError`` (None: "task failed").
    """
    if isinstance(error, Mapping):
        given = dict(error)
        envelope = {
            "type": given.pop("type", "TaskError"),
            "code": given.pop("code", "task_error"),
            "message": given.pop("message", "task failed"),
            "details": given.pop("details", {}),
            **given,
        }
        envelope["retryable"] = retryable
        recorded: Envelope = legible(envelope)
        return recorded, retryable
    if isinstance(error, TaskError):
        return task_error(error), error.retryable
    if isinstance(error, BaseException):
        return handler_raised(error, retryable), retryable
    reason = "task failed" if error is None else str(error)
    return _record("TaskError", "task_error", reason, retryable), retryable
