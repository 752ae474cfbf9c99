"""The guarded branches of a SQLite statement, for the plan tests.

SQLite plans a statement once, whatever its values, so a statement with optional
filters is written as a ``union all`` of branches, one per shape of the filters,
each behind guards that name only parameters (``:queue is not null and :status
is null``): exactly one branch's guards hold for any values, and the store runs
the file as written. ``EXPLAIN QUERY PLAN`` shows every branch; these helpers
find the one that runs for given values, so a test can check *its* plan.

A branch group is the lines between ``union all`` lines of one indentation: the
first branch starts at the ``select`` before the first of them, the last ends
before a line indented less, or as much and starting with ``order by`` or
``limit`` (the group's own ordering and limit).
"""

from __future__ import annotations

import itertools
import re
import sqlite3
from typing import Any

_GUARD_WORDS = {"is", "not", "null", "and", "or", "(", ")"}
_TERMS = re.compile(r"\s+and\s+(?![^(]*\))")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def is_guard(term: str) -> bool:
    """A term naming only parameters (``:p is null``, ``(:a is null or :b is null)``)."""
    words = re.sub(r":\w+", " ", term).replace("(", " ( ").replace(")", " ) ").split()
    return bool(words) and set(words) <= _GUARD_WORDS


def branches(sql: str) -> tuple[list[str], list[list[str]], list[str]] | None:
    """``(lines before, [each branch's lines], lines after)``, or None (no branches)."""
    lines = sql.splitlines()
    unions = [i for i, line in enumerate(lines) if line.strip() == "union all"]
    if not unions:
        return None
    indent = _indent(lines[unions[0]])
    start = max(
        i
        for i in range(unions[0])
        if _indent(lines[i]) == indent and lines[i].strip().startswith("select")
    )
    end = len(lines)
    for i in range(unions[-1] + 2, len(lines)):
        stripped = lines[i].strip()
        if _indent(lines[i]) < indent or (
            _indent(lines[i]) == indent and stripped.startswith(("order by", "limit"))
        ):
            end = i
            break
    cuts = [start - 1, *unions, end]
    parts = [lines[a + 1 : b] for a, b in itertools.pairwise(cuts)]
    return lines[:start], parts, lines[end:]


def guards(branch: list[str]) -> list[str]:
    """The guard terms of a branch's own ``where`` (indented as its ``select``), or
    of the first ``where`` inside it when it selects from a subquery."""
    indent = _indent(branch[0])
    own = [i for i, line in enumerate(branch) if line.strip().startswith("where ")]
    at = next((i for i in own if _indent(branch[i]) == indent), own[0] if own else None)
    if at is None:
        return []
    lines = [branch[at].strip()[len("where ") :]]
    for line in branch[at + 1 :]:
        if _indent(line) <= _indent(branch[at]) and not line.strip().startswith("and "):
            break
        lines.append(line)
    where = "\n".join(lines)
    return [term.strip() for term in _TERMS.split(where) if is_guard(term.strip())]


def running_branch(conn: sqlite3.Connection, sql: str, values: dict[str, Any]) -> str:
    """``sql`` with only the branch whose guards hold for ``values`` (``sql`` itself
    when it has no branches). Fails unless exactly one branch's guards hold, and
    when a branch has no guard. A recursive CTE's ``union all`` is no branching."""
    split = None if "with recursive" in sql else branches(sql)
    if split is None:
        return sql
    before, parts, after = split
    running = []
    for part in parts:
        terms = guards(part)
        assert terms, "a branch without a guard:\n" + "\n".join(part)
        check = "select 1 where " + " and ".join(terms)
        bound = {k: v for k, v in values.items() if re.search(rf":{k}\b", check)}
        if conn.execute(check, bound).fetchone():
            running.append(part)
    assert len(running) == 1, (values, len(running))
    return "\n".join([*before, *running[0], *after])


def guard_parameters(sql: str) -> list[str]:
    """Every parameter a guard of ``sql`` names, in name order."""
    split = branches(sql)
    if split is None:
        return []
    names = {p for part in split[1] for term in guards(part) for p in re.findall(r":(\w+)", term)}
    return sorted(names)
