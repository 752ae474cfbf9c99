"""The conformance runner: cairnq protocol v1 scenario files against the engine.

The scenario format is the one the cairnq SDKs' own suites use (described in
docs/protocol-notes.md, "Conformance scenarios"). The engine ships its own
scenarios in ``engine/conformance/scenarios`` (``SCENARIOS``); the cairnq SDKs'
shared suite is run the same way when a checkout of it is at hand.

Usage: ``python -m engine.conformance [--dsn DSN] [--schema S] [PATH...]`` where
each PATH is a scenario file or a folder of them (default: ``SCENARIOS``). Every
scenario runs on a fresh store (a new SQLite file; with ``--dsn``, a throwaway
Postgres schema, or the schema ``S`` with its data tables truncated). The runner
prints one line per failing scenario (its name, the index of the failing step in
``steps`` and the reason), then ``N passed, N failed``; the exit status is 0 only when none failed.
"""

from engine.conformance._main import main, run_paths
from engine.conformance._runner import OPS, ScenarioFailure, run_scenario, task_dict
from engine.conformance._scenario import (
    SCENARIOS,
    Scenario,
    ScenarioError,
    check_assertions,
    deep_equal,
    load_scenario,
    resolve,
    scenario_files,
)
from engine.conformance._stores import StoreFactory, postgres_stores, sqlite_stores

__all__ = [
    "OPS",
    "SCENARIOS",
    "Scenario",
    "ScenarioError",
    "ScenarioFailure",
    "StoreFactory",
    "check_assertions",
    "deep_equal",
    "load_scenario",
    "main",
    "postgres_stores",
    "resolve",
    "run_paths",
    "run_scenario",
    "scenario_files",
    "sqlite_stores",
    "task_dict",
]
