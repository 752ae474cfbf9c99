"""What a value may be before any dialect sees it: one set of rules for SQLite and Postgres.

Every public store method checks its arguments here, before any I/O, so a bad
value gets the same specific exception on both dialects and never reaches a
group commit, where it would fail the writes sharing its transaction:

* ``ValueError`` naming the field for a wrong type, an empty or unencodable
  string, an out-of-range integer or a non-finite progress value;
* ``SerializationError`` (from ``engine._json``) for JSON values.

Integers are bounded by the narrower column type of the two dialects
(docs/protocol-notes.md, Schema and migrations): ``priority``, ``attempt`` and ``max_attempts`` are
``integer`` on both, i.e. 32-bit on Postgres; the ``*_ms`` columns are 64-bit on
both. A relative duration (``lease_ms``, ``delay_ms``, ``older_than_ms``) is
added to or subtracted from the clock, so it is bounded well inside 64 bits.

Text that an index holds (``name``, ``queue``, ``key``, ``correlation_id``,
``parent_id``, ``root_id``) is at most ``INDEXED_TEXT_MAX_BYTES`` bytes of UTF-8 on
both dialects. The bound comes from Postgres: a B-tree entry must fit a third of
an 8 KiB page (2,704 bytes), and the widest index entry a submit writes,
``cairnq_tasks_claim_name_idx (queue, status, name, priority, run_at_ms, id)``,
carries two such strings; two of 1,024 bytes and the rest stay near 2,150 bytes,
even when nothing compresses. SQLite has no such limit, and is held to the same one.

Text is stored as UTF-8 by both drivers, so a lone surrogate (``"\\ud800"``) can
never be written. A NUL character is the one difference the dialects declare:
Postgres text and jsonb cannot hold it, SQLite can, so the caller says whether
the column refuses it (``TaskStore.text_refuses_nul``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from engine._errors import SerializationError
from engine._models import STATUSES, TERMINAL_STATUSES

#: ``integer`` columns (priority, attempt, max_attempts): 32-bit on Postgres.
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
#: ``bigint`` columns and parameters (limits, offsets, depths): 64-bit on both.
INT64_MAX = 2**63 - 1
#: A relative duration: ``now + d`` and ``now - d`` stay far inside 64 bits for
#: any clock this side of the year 140 million.
DURATION_MAX_MS = 2**62
#: A JSON "\u0000" escape not itself escaped (an even run of backslashes before it).
NUL_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")


def integer(value: Any, field: str, *, minimum: int, maximum: int = INT64_MAX) -> int:
    """An ``int`` (not a bool) in ``[minimum, maximum]``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{field} must be an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise ValueError(f"{field} must be an integer >= {minimum}, got {value}")
    if value > maximum:
        raise ValueError(f"{field} must be at most {maximum}, got {value}")
    return value


def at_least(value: Any, field: str, minimum: int) -> int:
    """An integer >= ``minimum`` (a setting: a limit, an interval, a size)."""
    return integer(value, field, minimum=minimum)


def int32(value: Any, field: str, *, minimum: int = INT32_MIN) -> int:
    """An integer that fits an ``integer`` column on both dialects."""
    return integer(value, field, minimum=minimum, maximum=INT32_MAX)


def duration_ms(value: Any, field: str, *, minimum: int = 0) -> int:
    """A relative duration in ms that the dialect adds to its clock."""
    return integer(value, field, minimum=minimum, maximum=DURATION_MAX_MS)


def boolean(value: Any, field: str) -> bool:
    """A ``bool``: 0/1, strings and None are refused rather than guessed."""
    if not isinstance(value, bool):
        raise ValueError(f"{field} must be True or False, got {value!r}")
    return value


def _storable(value: str, field: str, refuses_nul: bool) -> str:
    if value.isascii():  # constant time: no surrogate in it (the usual id or name)
        if refuses_nul and "\x00" in value:
            raise ValueError(f"{field} contains a NUL character, which Postgres text refuses")
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"{field} contains {value[exc.start : exc.end]!r} at {exc.start}, "
            "a lone surrogate that no UTF-8 column can store"
        ) from None
    if refuses_nul and "\x00" in value:
        raise ValueError(f"{field} contains a NUL character, which Postgres text refuses")
    return value


#: Most UTF-8 bytes of a string stored in an index (see the module's docstring).
INDEXED_TEXT_MAX_BYTES = 1024


def indexed_text(value: Any, field: str, *, refuses_nul: bool = False) -> str:
    """A non-empty string every dialect can store and index (at most 1,024 UTF-8 bytes)."""
    out = text(value, field, refuses_nul=refuses_nul)
    return _fits_index(out, field)


def optional_indexed_text(value: Any, field: str, *, refuses_nul: bool = False) -> str | None:
    """None, or a non-empty string every dialect can store and index."""
    return None if value is None else indexed_text(value, field, refuses_nul=refuses_nul)


def _fits_index(value: str, field: str) -> str:
    # Four bytes per character at most: only a long string needs encoding to tell.
    if len(value) * 4 > INDEXED_TEXT_MAX_BYTES:
        size = len(value.encode("utf-8"))
        if size > INDEXED_TEXT_MAX_BYTES:
            raise ValueError(
                f"{field} is {size:,} bytes of UTF-8; at most {INDEXED_TEXT_MAX_BYTES:,} "
                "are allowed (an index entry must fit Postgres' B-tree page limit)"
            )
    return value


def text(value: Any, field: str, *, refuses_nul: bool = False) -> str:
    """A non-empty string every dialect can store."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"{field} must be a non-empty string, got {value!r}")
    return _storable(value, field, refuses_nul)


def optional_text(value: Any, field: str, *, refuses_nul: bool = False) -> str | None:
    """None, or a string every dialect can store (empty allowed: a filter may match '')."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"{field} must be a string or None, got {type(value).__name__}")
    return _storable(value, field, refuses_nul)


def optional_key(value: Any, *, refuses_nul: bool = False) -> str | None:
    """None, or a non-empty key (indexed: at most 1,024 UTF-8 bytes)."""
    return optional_indexed_text(value, "key", refuses_nul=refuses_nul)


def text_list(value: Any, field: str, *, refuses_nul: bool = False) -> list[str]:
    """A list (not a bare string) of non-empty strings; may be empty."""
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise ValueError(f"{field} must be a list of strings, got {type(value).__name__}")
    return [text(item, f"{field}[{i}]", refuses_nul=refuses_nul) for i, item in enumerate(value)]


def queues(value: Any, *, refuses_nul: bool = False) -> list[str]:
    """A claim's queue list: at least one queue."""
    out = text_list(value, "queues", refuses_nul=refuses_nul)
    if not out:
        raise ValueError("queues must not be empty")
    return out


def names(value: Any, *, refuses_nul: bool = False) -> list[str] | None:
    """A claim's optional name filter (None = any name, [] = nothing)."""
    return None if value is None else text_list(value, "names", refuses_nul=refuses_nul)


def status(value: Any, *, terminal_only: bool = False) -> str | None:
    """An optional status filter."""
    if value is None:
        return None
    allowed = TERMINAL_STATUSES if terminal_only else STATUSES
    if not isinstance(value, str) or value not in allowed:
        kind = "terminal status" if terminal_only else "status"
        raise ValueError(f"unknown {kind} {value!r}; expected one of {sorted(allowed)}")
    return value


def progress(value: Any) -> float | None:
    """None, or a finite number stored as a double."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"progress must be a finite number or None, got {value!r}")
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise ValueError(f"progress must be a finite number or None, got {value!r}")
    return number


def json_text(encoded: str, field: str, *, refuses_nul: bool) -> str:
    """Encoded JSON a dialect can store: jsonb refuses the ``\\u0000`` escape."""
    if refuses_nul and NUL_ESCAPE.search(encoded):
        raise SerializationError(f"{field} contains a NUL character (\\u0000); jsonb refuses it")
    return encoded
