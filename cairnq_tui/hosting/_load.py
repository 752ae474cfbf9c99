"""Turning ``MODULE:ATTR`` into an ``engine.Worker``, with one-line error messages.

A user's module fails in many ways (a syntax error, an exception at import, a
wrong attribute, a resource used but not declared). The console reports each as
one message naming the module, the file and the line, never as a traceback dump:
the operator fixes the file and presses reload.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import re
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from engine import TaskStore, Worker

_SPEC = re.compile(
    r"^(?P<module>[A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)*):(?P<attr>[A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)*)$"
)
# Parameter names that ask for the target text (path or DSN) instead of a store.
_TARGET_PARAMS = frozenset({"target", "dsn", "path"})


class HostError(Exception):
    """A hosted worker cannot be loaded or started; ``str()`` is the operator's message."""


@dataclass(frozen=True, slots=True)
class WorkerSpec:
    """What ``--worker MODULE:ATTR`` names."""

    module: str
    attr: str

    @classmethod
    def parse(cls, text: str) -> WorkerSpec:
        """Parse ``MODULE:ATTR`` (both may be dotted).

        Raises:
            HostError: the text is not of that form.
        """
        match = _SPEC.match(text.strip())
        if match is None:
            raise HostError(
                f"--worker {text!r}: expected MODULE:ATTR, e.g. myapp.jobs:worker "
                "(a module importable from the current folder and the Worker in it)"
            )
        return cls(match["module"], match["attr"])

    def __str__(self) -> str:
        return f"{self.module}:{self.attr}"


def _where(exc: BaseException, module_file: str | None) -> str:
    """``file, line N`` of the user's code the exception came from."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"{exc.filename}, line {exc.lineno}"
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not _is_machinery(f.filename)]
    # Prefer the deepest frame in the user's module file: that is the line to fix
    # even when the exception was raised inside the engine (an undeclared resource).
    own = [f for f in frames if module_file is not None and _same_file(f.filename, module_file)]
    candidates = own or frames
    if not candidates:
        return module_file or "?"
    return f"{candidates[-1].filename}, line {candidates[-1].lineno}"


def _is_machinery(filename: str) -> bool:
    return filename.startswith("<frozen") or _same_file(filename, __file__)


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return a == b


def describe_error(spec: WorkerSpec, exc: BaseException, module_file: str | None) -> str:
    """One message for an exception raised while loading ``spec``."""
    if (
        isinstance(exc, ModuleNotFoundError)
        and exc.name is not None
        and (spec.module == exc.name or spec.module.startswith(exc.name + "."))
    ):
        return (
            f"cannot load {spec}: no module named {exc.name!r} "
            f"(looked in {os.getcwd()} and on sys.path)"
        )
    text = exc.msg if isinstance(exc, SyntaxError) else str(exc)
    kind = type(exc).__name__
    return f"cannot load {spec}: {kind}: {text} ({_where(exc, module_file)})"


def _forget_bytecode(module: ModuleType) -> None:
    # The bytecode cache is keyed by the source's mtime in whole seconds and its
    # size: a one-character fix saved within the second would reload stale code.
    source = getattr(module, "__file__", None)
    if not source or not source.endswith(".py"):
        return
    try:
        Path(importlib.util.cache_from_source(source)).unlink(missing_ok=True)
    except (NotImplementedError, ValueError, OSError):
        return


def _module_file(name: str) -> str | None:
    module = sys.modules.get(name)
    if module is not None:
        return getattr(module, "__file__", None)
    try:
        found = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    return found.origin if found is not None else None


def import_module(spec: WorkerSpec, *, reload: bool) -> ModuleType:
    """Import (or re-import) the spec's module from the current folder.

    Raises:
        HostError: the module cannot be imported; the message names file and line.
    """
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    importlib.invalidate_caches()
    try:
        existing = sys.modules.get(spec.module)
        if reload and existing is not None:
            _forget_bytecode(existing)
            return importlib.reload(existing)
        return importlib.import_module(spec.module)
    except (Exception, SystemExit) as exc:
        raise HostError(describe_error(spec, exc, _module_file(spec.module))) from None


def find_attribute(spec: WorkerSpec, module: ModuleType) -> object:
    value: object = module
    for part in spec.attr.split("."):
        if not hasattr(value, part):
            public = sorted(n for n in vars(module) if not n.startswith("_"))
            shown = ", ".join(public[:12]) + (" …" if len(public) > 12 else "")
            raise HostError(
                f"cannot load {spec}: module {spec.module!r} "
                f"({getattr(module, '__file__', '?')}) has no attribute {spec.attr!r}"
                f" (it defines: {shown or 'nothing public'})"
            )
        value = getattr(value, part)
    return value


def _wants_target(factory: Callable[..., object]) -> bool:
    try:
        params = list(inspect.signature(factory).parameters.values())
    except (TypeError, ValueError):
        return False
    return bool(params) and (
        params[0].name in _TARGET_PARAMS or params[0].annotation in (str, "str")
    )


def build_worker(
    spec: WorkerSpec,
    module: ModuleType,
    make_store: Callable[[], TaskStore],
    target_text: str,
) -> Worker:
    """The worker ``spec`` names.

    ATTR may be a ``Worker``, or a callable returning one from a store (a fresh
    store on the console's database, made by ``make_store``) or, when its first
    parameter is named ``target``/``dsn``/``path`` or typed ``str``, from the
    target text.

    Raises:
        HostError: a wrong attribute, a factory that fails or returns something else.
    """
    value = find_attribute(spec, module)
    if isinstance(value, Worker):
        return value
    if not callable(value):
        raise HostError(
            f"cannot load {spec}: {spec.attr!r} is a {type(value).__name__}, "
            "not an engine.Worker nor a function returning one"
        )
    try:
        made = value(target_text) if _wants_target(value) else value(make_store())
    except Exception as exc:
        raise HostError(describe_error(spec, exc, getattr(module, "__file__", None))) from None
    if not isinstance(made, Worker):
        raise HostError(
            f"cannot load {spec}: calling {spec.attr!r} returned "
            f"{type(made).__name__}, not an engine.Worker"
        )
    return made
