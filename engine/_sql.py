"""Named SQL statements, loaded from ``sql/`` (source checkout) or ``engine/sql`` (wheel).

Every statement is one file, ``sql/<dialect>/<name>.sql``, written with named
parameters in its driver's own style (``:name`` for sqlite3, ``%(name)s`` for
psycopg, a literal ``%`` doubled) and run exactly as written; migrations are
``sql/migrations/<dialect>/NNNN_name.sql``. The Python side refers to statements by
name only and never edits their text.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Literal

Dialect = Literal["sqlite", "postgres"]

#: A parameter as each dialect's files write it: ``:name`` (sqlite3's named style)
#: or ``%(name)s`` (psycopg's). ``::casts`` are not parameters.
PARAM = re.compile(r"(?<![:\w]):([A-Za-z_][A-Za-z0-9_]*)|%\(([A-Za-z_][A-Za-z0-9_]*)\)s")


def parameters(text: str) -> set[str]:
    """The names of the parameters ``text`` takes (either dialect's style)."""
    return {a or b for a, b in PARAM.findall(text)}


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
