"""All shared conformance scenarios, on SQLite and on Postgres, plus the runner's CLI.

The scenarios live outside this repository (``../shared/conformance/scenarios``
beside the clone, as in CI); ``CAIRNQ_CONFORMANCE_DIR`` points elsewhere.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from engine.conformance import load_scenario, run_scenario
from engine.store.postgres import PostgresStore
from engine.store.sqlite import SQLiteStore

REPO = Path(__file__).resolve().parents[2]
SCENARIO_COUNT = 35


def scenario_dir() -> Path:
    configured = os.environ.get("CAIRNQ_CONFORMANCE_DIR")
    if configured:
        return Path(configured).resolve()
    return (REPO.parent / "shared" / "conformance" / "scenarios").resolve()


def scenario_params() -> list[object]:
    files = sorted(scenario_dir().glob("*.json"))
    if not files:
        # Never let a missing folder turn the suite into zero silent passes.
        return [pytest.param(None, id="no-scenarios-found")]
    return [pytest.param(path, id=path.stem) for path in files]


def require(path: Path | None) -> Path:
    if path is None:
        pytest.fail(f"no scenario files in {scenario_dir()}; set CAIRNQ_CONFORMANCE_DIR")
    return path


@pytest.mark.parametrize("path", scenario_params())
async def test_scenario_sqlite(path: Path | None, sqlite_path: Path) -> None:
    scenario = load_scenario(require(path))
    store = SQLiteStore(str(sqlite_path))
    await store.connect()
    try:
        failure = await run_scenario(scenario, store)
    finally:
        await store.close()
    assert failure is None, failure.line()


@pytest.mark.parametrize("path", scenario_params())
async def test_scenario_postgres(path: Path | None, pg_dsn: str, pg_schema: str) -> None:
    scenario = load_scenario(require(path))
    store = PostgresStore(pg_dsn, schema=pg_schema, max_size=2)
    await store.connect()
    try:
        failure = await run_scenario(scenario, store)
    finally:
        await store.close()
    assert failure is None, failure.line()


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "engine.conformance", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )


def test_cli_runs_every_scenario_on_sqlite() -> None:
    out = run_cli(str(scenario_dir()))
    assert out.stdout.splitlines()[-1:] == [f"{SCENARIO_COUNT} passed, 0 failed"], (
        out.stdout + out.stderr
    )
    assert out.returncode == 0


def test_cli_runs_every_scenario_on_postgres_in_one_truncated_schema(
    pg_dsn: str, pg_schema: str
) -> None:
    out = run_cli("--dsn", pg_dsn, "--schema", pg_schema, str(scenario_dir()))
    assert out.stdout.splitlines()[-1:] == [f"{SCENARIO_COUNT} passed, 0 failed"], (
        out.stdout + out.stderr
    )
    assert out.returncode == 0


def test_cli_postgres_throwaway_schemas_are_dropped(pg_dsn: str) -> None:
    files = sorted(scenario_dir().glob("*.json"))[:2]
    assert files, f"no scenario files in {scenario_dir()}"
    marker = "cq_conformance_%"
    with psycopg.connect(pg_dsn) as conn:
        before = conn.execute(
            "select count(*) from pg_namespace where nspname like %s", (marker,)
        ).fetchone()
    out = run_cli("--dsn", pg_dsn, *map(str, files))
    assert out.stdout.splitlines()[-1:] == [f"{len(files)} passed, 0 failed"], (
        out.stdout + out.stderr
    )
    with psycopg.connect(pg_dsn) as conn:
        after = conn.execute(
            "select count(*) from pg_namespace where nspname like %s", (marker,)
        ).fetchone()
    assert after == before
