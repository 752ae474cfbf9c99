"""Conformance scenarios on SQLite and on Postgres, plus the runner's CLI.

Two suites run here. The engine's own scenarios (``engine/conformance/scenarios``,
shipped with the package) always run. The cairnq SDKs' shared suite lives outside
this repository (``../shared/conformance/scenarios`` beside the clone, as in CI;
``CAIRNQ_CONFORMANCE_DIR`` points elsewhere): it runs whenever it is there and is
skipped, saying so, when it is not. With ``CAIRNQ_REQUIRE_SHARED_CONFORMANCE=1``
(what .ci/run sets) a missing shared suite fails instead.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from pg_support import pg_dsn_or_skip

from engine.conformance import OPS, SCENARIOS, load_scenario, postgres_stores, run_scenario
from engine.store.sqlite import SQLiteStore

REPO = Path(__file__).resolve().parents[2]
SHARED_SCENARIO_COUNT = 35
REQUIRE_SHARED_ENV = "CAIRNQ_REQUIRE_SHARED_CONFORMANCE"


def shared_dir() -> Path:
    configured = os.environ.get("CAIRNQ_CONFORMANCE_DIR")
    if configured:
        return Path(configured).resolve()
    return (REPO.parent / "shared" / "conformance" / "scenarios").resolve()


def own_files() -> list[Path]:
    return sorted(SCENARIOS.glob("*.json"))


def shared_files() -> list[Path]:
    return sorted(shared_dir().glob("*.json"))


def scenario_params() -> list[object]:
    params: list[object] = [pytest.param(path, id=f"own-{path.stem}") for path in own_files()]
    shared = shared_files()
    if shared:
        params += [pytest.param(path, id=f"shared-{path.stem}") for path in shared]
    else:
        # One visible skip (or, in CI, a failure) instead of zero silent passes.
        params.append(pytest.param(None, id="shared-not-found"))
    return params


def require(path: Path | None) -> Path:
    if path is not None:
        return path
    message = f"shared conformance scenarios not found in {shared_dir()} (CAIRNQ_CONFORMANCE_DIR)"
    if os.environ.get(REQUIRE_SHARED_ENV) == "1":
        pytest.fail(f"{message} while {REQUIRE_SHARED_ENV}=1")
    pytest.skip(message)


def test_the_own_suite_is_there_and_uses_every_op() -> None:
    files = own_files()
    assert len(files) >= 30, f"expected the engine's own scenarios in {SCENARIOS}"
    ops_used: set[str] = set()
    steps = 0
    for path in files:
        scenario = load_scenario(path)
        assert scenario.name == path.stem, f"{path.name}: name {scenario.name!r}"
        steps += len(scenario.steps)
        ops_used.update(str(step["op"]) for step in scenario.steps)
    assert set(OPS) | {"expect"} <= ops_used, sorted(set(OPS) - ops_used)
    assert steps >= 319  # at least as many steps as the SDKs' shared suite has


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


@pytest.fixture(scope="module")
def scenario_schema() -> Iterator[tuple[str, str]]:
    """One schema for this module's Postgres scenarios, truncated before each one
    (migrating a fresh schema per scenario would cost more than the scenario)."""
    dsn = pg_dsn_or_skip()
    name = f"t_conf_{uuid.uuid4().hex[:12]}"
    yield dsn, name
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'drop schema if exists "{name}" cascade')


@pytest.mark.postgres
@pytest.mark.parametrize("path", scenario_params())
async def test_scenario_postgres(path: Path | None, scenario_schema: tuple[str, str]) -> None:
    scenario = load_scenario(require(path))
    async with postgres_stores(*scenario_schema)() as store:
        failure = await run_scenario(scenario, store)
    assert failure is None, failure.line()


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "engine.conformance", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )


def last_line(out: subprocess.CompletedProcess[str]) -> list[str]:
    return out.stdout.splitlines()[-1:]


def test_cli_without_a_path_runs_the_own_scenarios_on_sqlite() -> None:
    out = run_cli()
    assert last_line(out) == [f"{len(own_files())} passed, 0 failed"], out.stdout + out.stderr
    assert out.returncode == 0


def test_cli_runs_the_shared_scenarios_when_present() -> None:
    files = shared_files()
    require(files[0] if files else None)
    out = run_cli(str(shared_dir()))
    assert last_line(out) == [f"{SHARED_SCENARIO_COUNT} passed, 0 failed"], out.stdout + out.stderr
    assert out.returncode == 0


def test_cli_reports_a_failing_own_scenario(tmp_path: Path) -> None:
    # The bundled files are real scenarios: one with a wrong expectation fails.
    source = SCENARIOS / "submit_defaults.json"
    data = json.loads(source.read_text(encoding="utf-8"))
    data["steps"][0]["expect"]["equals"]["status"] = "running"
    broken = tmp_path / "submit_defaults.json"
    broken.write_text(json.dumps(data), encoding="utf-8")
    out = run_cli(str(broken))
    assert last_line(out) == ["0 passed, 1 failed"], out.stdout + out.stderr
    assert "FAIL submit_defaults step 0 (submit)" in out.stdout
    assert out.returncode == 1


def test_cli_runs_every_own_scenario_on_postgres_in_one_truncated_schema(
    pg_dsn: str, pg_schema: str
) -> None:
    out = run_cli("--dsn", pg_dsn, "--schema", pg_schema)
    assert last_line(out) == [f"{len(own_files())} passed, 0 failed"], out.stdout + out.stderr
    assert out.returncode == 0


def test_cli_postgres_throwaway_schemas_are_dropped(pg_dsn: str) -> None:
    files = own_files()[:2]

    def throwaway_schemas() -> set[str]:
        with psycopg.connect(pg_dsn) as conn:
            rows = conn.execute(
                "select nspname from pg_namespace where nspname like 'cq_conformance_%'"
            ).fetchall()
        return {name for (name,) in rows}

    before = throwaway_schemas()
    out = run_cli("--dsn", pg_dsn, *map(str, files))
    assert last_line(out) == [f"{len(files)} passed, 0 failed"], out.stdout + out.stderr
    # Other runs on the same server (parallel tests, other checkouts) create and drop
    # their own: only a schema that stays is one this run left behind.
    deadline = time.monotonic() + 30
    while (left := throwaway_schemas() - before) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert left == set()
