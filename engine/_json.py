"""JSON for the four JSON columns: orjson, but only for values JSON can state faithfully.

orjson happily writes NaN as ``null`` and encodes datetimes, UUIDs, enums and
dataclasses natively; the cairnq SDKs refuse all of those. So every value is
checked by a walk first, and anything without a faithful JSON form raises
``SerializationError`` before the caller writes anything.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import orjson

from engine._errors import SerializationError

_SCALARS = (str, int, type(None))


@dataclass(frozen=True, slots=True)
class UndecodableJSON:
    """A stored JSON column the engine cannot decode, as inspection reads show it.

    Inspection reads (``engine.inspection.Inspector``, ``get`` and the other row
    reads a console makes) put this in place of the decoded value, so one bad row
    never stops a page of good ones from being shown.
    """

    #: The column's raw text, exactly as stored.
    text: str
    #: Why it cannot be decoded, in words (e.g. "nested deeper than 1000 levels").
    reason: str


_INT_MIN, _INT_MAX = -(2**63), 2**64 - 1


def _check(value: Any) -> bool:
    """Raise for unfaithful values; return True if some dict has a non-str key."""
    odd_keys = False
    stack: list[Any] = [value]
    seen: set[int] = set()
    while stack:
        item = stack.pop()
        if isinstance(item, _SCALARS):  # bool is an int
            # orjson refuses integers beyond 64 bits, and reads them back as floats:
            # refuse them on every path, not only where orjson writes.
            if isinstance(item, int) and not _INT_MIN <= item <= _INT_MAX:
                raise SerializationError(f"integer {item} is outside the 64-bit range")
            continue
        if isinstance(item, float):
            if not math.isfinite(item):
                raise SerializationError(
                    f"{item!r} has no JSON form (NaN and Infinity are refused)"
                )
            continue
        if isinstance(item, dict):
            marker = id(item)
            if marker in seen:
                raise SerializationError("circular reference in value")
            seen.add(marker)
            for key in item:
                if not isinstance(key, str):
                    if isinstance(key, float) and not math.isfinite(key):
                        raise SerializationError(f"dict key {key!r} has no JSON form")
                    if not isinstance(key, (int, float, type(None))):
                        raise SerializationError(
                            f"dict key of type {type(key).__name__} has no JSON form"
                        )
                    odd_keys = True
            stack.extend(item.values())
            continue
        if isinstance(item, (list, tuple)):
            marker = id(item)
            if marker in seen:
                raise SerializationError("circular reference in value")
            seen.add(marker)
            stack.extend(item)
            continue
        raise SerializationError(f"value of type {type(item).__name__} is not JSON-serializable")
    return odd_keys


def dumps(value: Any) -> str:
    """Compact JSON text for ``value``, or ``SerializationError``.

    Tuples become arrays and non-string keys take their JSON spelling (``1`` ->
    ``"1"``), as with the standard library encoder.
    """
    odd_keys = _check(value)
    try:
        if odd_keys:
            text = json.dumps(value, allow_nan=False, separators=(",", ":"), ensure_ascii=False)
            # Lone surrogates pass the stdlib encoder but no UTF-8 column takes them
            # (orjson refuses them on the other path): UnicodeEncodeError is a ValueError.
            text.encode()
            return text
        return orjson.dumps(value).decode()
    except (TypeError, ValueError, RecursionError, orjson.JSONEncodeError) as exc:
        raise SerializationError(str(exc)) from exc


def dumps_or_none(value: Any) -> str | None:
    """Like ``dumps`` but ``None`` stays SQL NULL (for ``result``)."""
    return None if value is None else dumps(value)


def loads(text: str | bytes | None) -> Any:
    """Parse stored JSON text; SQL NULL reads as None."""
    if text is None:
        return None
    return orjson.loads(text)
