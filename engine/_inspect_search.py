"""Search text turned into index ranges: id prefixes, id tails, key prefixes."""

from __future__ import annotations

from engine._inspect_types import CappedCount, TaskFilter

_CROCKFORD = frozenset("0123456789ABCDEFGHJKMNPQRSTVWXYZ")


def prefix_range(prefix: str) -> tuple[str, str | None]:
    """``[from, to)`` bounds of the strings starting with ``prefix`` (``to`` None = open).

    Binary (SQLite) and C-collation (Postgres) order put every string with the
    prefix inside these bounds, so a prefix search becomes an index range seek.
    """
    stem = prefix
    while stem:
        last = ord(stem[-1])
        if last < 0x10FFFF:
            return prefix, stem[:-1] + chr(last + 1)
        stem = stem[:-1]
    return prefix, None


def normalise_id_prefix(text: str) -> str:
    """An id prefix as stored: ``task_`` + upper-case Crockford digits.

    ``01j9`` and ``TASK_01J9`` both become ``task_01J9``; anything else is kept.
    """
    text = text.strip()
    body = text[5:] if text.lower().startswith("task_") else text
    if body and set(body.upper()) <= _CROCKFORD:
        return "task_" + body.upper()
    return text


def is_id_tail(flt: TaskFilter, total: CappedCount | None) -> bool:
    """True when an id search matched no id prefix but could be the end of one.

    The random part of an id is what people copy from logs; four or more Crockford
    digits without the ``task_`` prefix are searched inside ids instead.
    """
    text = (flt.active_search or "").strip()
    return (
        flt.search_kind == "id"
        and total is not None
        and total.value == 0
        and len(text) >= 4
        and not text.lower().startswith("task_")
        and set(text.upper()) <= _CROCKFORD
    )


def id_at(ms: int) -> str:
    """The smallest task id minted at epoch millisecond ``ms`` (its 80 random bits zero).

    Ids are ``task_`` + a ULID led by the creation millisecond, so every task
    created at or after ``ms`` has an id ``>= id_at(ms)``: a creation time range
    becomes a primary-key range.
    """
    value = (min(max(ms, 0), (1 << 48) - 1)) << 80
    digits = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
    return "task_" + "".join(digits[(value >> shift) & 31] for shift in range(125, -1, -5))
