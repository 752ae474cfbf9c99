"""JSON for the four JSON columns: orjson, but only for values JSON can state faithfully.

orjson happily writes NaN as ``null`` and encodes datetimes, UUIDs, enums and
dataclasses natively; the cairnq SDKs refuse all of those. So every value is
checked by a walk first, and anything without a faithful JSON form raises
``SerializationError`` before the caller writes anything: values JSON cannot
hold, dict keys that are not strings (``{1: "a"}`` would read back as
``{"1": "a"}``), and nesting deeper than ``MAX_DEPTH``.

One depth limit for writing and reading: the engine never writes JSON it could
not read back. Reading is lenient where one bad row must not stop others:
``loads_column`` answers an ``UndecodableJSON`` (raw text and reason) instead
of raising, for whatever another writer stored that cannot be decoded.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

import orjson

from engine._errors import SerializationError
from engine._models import UndecodableJSON

#: The deepest nesting of arrays and objects the engine writes or reads: ``[]``
#: is depth 1, ``[[1]]`` depth 2. orjson's reader refuses deeper documents, so
#: the writer refuses them too (``SerializationError``).
MAX_DEPTH = 1024
#: orjson's writer stops at this depth; deeper values take the slower writer here.
_ORJSON_WRITE_DEPTH = 254


_INT_MIN, _INT_MAX = -(2**63), 2**64 - 1
#: orjson writes floats from 1e16 up in exponent form (``1.2345678901234567e+19``).
#: Postgres jsonb keeps such a number as a decimal without a fraction and hands it
#: back as ``12345678901234567000``, which reads as an int (a different value):
#: in this range the writer spells the float out with a ``.0``.
_SPELLED_OUT_FROM = 1e16
_SPELLED_OUT_BELOW = float(2**64)
_CONTAINERS = (dict, list, tuple)


def _check_scalar(item: Any) -> bool:
    """Raise for an unfaithful scalar; True if orjson's spelling would not round-trip."""
    if item is None or isinstance(item, str):
        return False
    if isinstance(item, int):  # bool is an int
        # orjson refuses integers beyond 64 bits, and reads them back as floats:
        # refuse them on every path, not only where orjson writes.
        if not _INT_MIN <= item <= _INT_MAX:
            raise SerializationError(f"integer {item} is outside the 64-bit range")
        return False
    if isinstance(item, float):
        if not math.isfinite(item):
            raise SerializationError(f"{item!r} has no JSON form (NaN and Infinity are refused)")
        return _SPELLED_OUT_FROM <= abs(item) < _SPELLED_OUT_BELOW
    raise SerializationError(f"value of type {type(item).__name__} is not JSON-serializable")


def _check(value: Any) -> bool:
    """Raise for unfaithful values; True if orjson cannot write it as it must read back."""
    if not isinstance(value, _CONTAINERS):
        return _check_scalar(value)
    slow = False
    stack: list[tuple[Any, int]] = [(value, 1)]
    seen: set[int] = set()
    while stack:
        container, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise SerializationError(
                f"value is nested deeper than {MAX_DEPTH} levels (the most the engine reads back)"
            )
        if depth > _ORJSON_WRITE_DEPTH:
            slow = True
        marker = id(container)
        if marker in seen:
            raise SerializationError("circular reference in value")
        seen.add(marker)
        if isinstance(container, dict):
            for key in container:
                if not isinstance(key, str):
                    raise SerializationError(
                        f"dict key {key!r} ({type(key).__name__}) is not a string: JSON "
                        "keys are strings, so it would not read back as it was written"
                    )
            children: Any = container.values()
        else:
            children = container
        for item in children:
            if isinstance(item, _CONTAINERS):
                stack.append((item, depth + 1))
            elif _check_scalar(item):
                slow = True
    return slow


class _Text(str):
    """Text the slow writer emits as it is (punctuation between values)."""

    __slots__ = ()


def _scalar_text(item: Any) -> str:
    if isinstance(item, float) and _SPELLED_OUT_FROM <= abs(item) < _SPELLED_OUT_BELOW:
        # Every float this large is integral: its shortest digits, spelled out.
        return format(Decimal(repr(item)), "f") + ".0"
    return orjson.dumps(item).decode()


def _write_slowly(value: Any) -> str:
    """The JSON text of a checked value, without recursion and at any depth."""
    out: list[str] = []
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if type(item) is _Text:
            out.append(item)
        elif isinstance(item, dict):
            out.append("{")
            stack.append(_Text("}"))
            entries = list(item.items())
            for index in range(len(entries) - 1, -1, -1):
                key, child = entries[index]
                stack.append(child)
                stack.append(_Text(("," if index else "") + orjson.dumps(key).decode() + ":"))
        elif isinstance(item, (list, tuple)):
            out.append("[")
            stack.append(_Text("]"))
            for index in range(len(item) - 1, -1, -1):
                stack.append(item[index])
                if index:
                    stack.append(_Text(","))
        else:
            out.append(_scalar_text(item))
    return "".join(out)


def dumps(value: Any) -> str:
    """Compact JSON text for ``value``, or ``SerializationError``.

    Tuples become arrays. The text always reads back (``loads``) as ``value``.
    """
    slow = _check(value)
    try:
        if slow:
            return _write_slowly(value)
        return orjson.dumps(value).decode()
    except (TypeError, ValueError, orjson.JSONEncodeError) as exc:
        # A lone surrogate in a string: no UTF-8 column can take it.
        raise SerializationError(str(exc)) from exc


def dumps_or_none(value: Any) -> str | None:
    """Like ``dumps`` but ``None`` stays SQL NULL (for ``result``)."""
    return None if value is None else dumps(value)


def loads(text: str | bytes | None) -> Any:
    """Parse stored JSON text; SQL NULL reads as None (raises on undecodable text)."""
    if text is None:
        return None
    return orjson.loads(text)


def _raw_text(text: str | bytes | bytearray | memoryview) -> str:
    if isinstance(text, str):
        return text
    return bytes(text).decode("utf-8", errors="replace")


def loads_column(text: str | bytes | bytearray | memoryview | None) -> Any:
    """Parse a stored JSON column; text that cannot be decoded becomes ``UndecodableJSON``.

    For reads of rows another writer may have stored (a cairnq SDK with a raised
    recursion limit writes deeper than ``MAX_DEPTH``; a hand-written row may not
    be JSON at all): one such row must not make a whole read fail.
    """
    if text is None:
        return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        reason = str(exc)
        if "depth limit" in reason or "recursion" in reason.lower():
            reason = f"nested deeper than {MAX_DEPTH} levels"
        else:
            reason = f"not valid JSON ({reason})"
        return UndecodableJSON(_raw_text(text), reason)


def undecodable_fields(*values: Any) -> bool:
    """True if any of ``values`` is an ``UndecodableJSON``."""
    return any(type(value) is UndecodableJSON for value in values)
