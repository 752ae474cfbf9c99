"""Named SQL statements, loaded from ``sql/`` (source checkout) or ``engine/sql`` (wheel).

Every statement is one file, ``sql/<dialect>/<name>.sql``, written with named
``:params``; migrations are ``sql/migrations/<dialect>/NNNN_name.sql``. The Python
side refers to statements by name only.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Literal

Dialect = Literal["sqlite", "postgres"]

_PARAM = re.compile(r"(?<![:\w]):([A-Za-z_][A-Za-z0-9_]*)")
_OPTIONAL_FILTER = re.compile(
    r"\(\s*:(?P<p>[A-Za-z_][A-Za-z0-9_]*)(?:::text)?\s+is\s+null\s+or\s+(?P<col>[A-Za-z_][A-Za-z0-9_.]*)"
    r"\s*(?P<op><=|>=|<|>|=)\s*:(?P=p)(?:::text)?\s*\)",
    re.IGNORECASE,
)


def sql_root() -> Path:
    """The folder holding ``sqlite/``, ``postgres/`` and ``migrations/``."""
    installed = Path(__file__).resolve().parent / "sql"
    if installed.is_dir():
        return installed
    checkout = Path(__file__).resolve().parent.parent / "sql"
    if checkout.is_dir():
        return checkout
    raise FileNotFoundError(f"no sql/ folder beside {Path(__file__).parent} or its parent")


def _strip_comments(text: str) -> str:
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("--")]
    return "\n".join(lines).strip().rstrip(";").strip()


@cache
def statement(dialect: Dialect, name: str) -> str:
    """The text of one statement, header comments removed, no trailing semicolon."""
    path = sql_root() / dialect / f"{name}.sql"
    return _strip_comments(path.read_text(encoding="utf-8"))


def migrations(dialect: Dialect) -> list[tuple[str, str]]:
    """``(recorded name, script)`` for every migration of the dialect, in name order.

    The recorded name is the file name with its extension, exactly what the cairnq
    SDKs write into ``cairnq_migrations``.
    """
    folder = sql_root() / "migrations" / dialect
    return [(p.name, p.read_text(encoding="utf-8")) for p in sorted(folder.glob("*.sql"))]


@cache
def specialise(text: str, active: frozenset[str]) -> str:
    """Rewrite ``(:p is null or col = :p)`` to ``col = :p`` for each active ``p``.

    The comparisons ``<``, ``<=``, ``>`` and ``>=`` are rewritten the same way (keyset
    cursors and prefix ranges need them to seek an index).

    One plan serves both branches of the generic form and it uses no index, so a
    filter that has a value is spelled as a plain equality before preparing.
    Filters whose value is NULL keep the generic form (which is then always true).
    """

    def repl(match: re.Match[str]) -> str:
        param = match.group("p")
        if param in active:
            return f"{match.group('col')} {match.group('op')} :{param}"
        return match.group(0)

    return _OPTIONAL_FILTER.sub(repl, text)


@cache
def to_pyformat(text: str) -> str:
    """``:name`` -> ``%(name)s`` for psycopg; literal ``%`` doubled; ``::casts`` kept."""
    escaped = text.replace("%", "%%")
    return _PARAM.sub(lambda m: f"%({m.group(1)})s", escaped)
