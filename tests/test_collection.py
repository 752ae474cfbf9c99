"""The suite's own bookkeeping: every test case that runs on Postgres says so.

A Postgres case without the ``postgres`` mark would skip silently without a
server, and CI's CAIRNQ_REQUIRE_PG=1 (which fails such skips) would not see it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# Modules whose Postgres cases come from a parametrised fixture, not from pg_dsn.
PARAMETRISED = ["tests/engine/test_inspection.py", "tests/engine/test_complete_many.py"]


def collect(*args: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "-p", "no:xdist", "-o", "addopts=", *args, *PARAMETRISED],
        capture_output=True, text=True, cwd=REPO, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    return [line for line in out.stdout.splitlines() if "::" in line]


def test_postgres_cases_of_parametrised_tests_carry_the_postgres_mark() -> None:
    everything = collect()
    postgres_cases = [node for node in everything if "postgres" in node]
    assert postgres_cases, everything
    not_marked = collect("-m", "not postgres")
    assert [node for node in not_marked if "postgres" in node] == []
    assert len(not_marked) == len(everything) - len(postgres_cases)
