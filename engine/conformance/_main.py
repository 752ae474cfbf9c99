"""The command line of the conformance runner (see ``engine.conformance``)."""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from engine.conformance._runner import ScenarioFailure, run_scenario
from engine.conformance._scenario import (
    SCENARIOS,
    ScenarioError,
    load_scenario,
    scenario_files,
)
from engine.conformance._stores import StoreFactory, postgres_stores, sqlite_stores


async def _run_file(path: Path, stores: StoreFactory) -> ScenarioFailure | None:
    try:
        scenario = load_scenario(path)
    except ScenarioError as exc:
        return ScenarioFailure(path.stem, None, None, str(exc))
    try:
        async with stores() as store:
            return await run_scenario(scenario, store)
    except Exception as exc:
        # Opening, closing or cleaning up the store failed: the scenario did not pass.
        return ScenarioFailure(scenario.name, None, None, f"store: {type(exc).__name__}: {exc}")


async def run_paths(
    paths: Sequence[Path], stores: StoreFactory, *, out: TextIO | None = None
) -> tuple[int, int]:
    """Run every scenario under ``paths``, one fresh store each, one after another.

    Prints a ``FAIL`` line per failing scenario to ``out`` (stdout by default).

    Returns:
        ``(passed, failed)``.

    Raises:
        FileNotFoundError: a path is neither a file nor a folder.
    """
    stream = out or sys.stdout
    passed = failed = 0
    for path in scenario_files(paths):
        failure = await _run_file(path, stores)
        if failure is None:
            passed += 1
        else:
            failed += 1
            print(failure.line(), file=stream, flush=True)
    return passed, failed


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m engine.conformance",
        description="Run cairnq conformance scenarios against the engine, each on a fresh store.",
    )
    parser.add_argument(
        "--dsn", help="run on Postgres at this DSN (default: SQLite files in a temporary folder)"
    )
    parser.add_argument(
        "--schema",
        help="with --dsn: use this schema, truncating its data tables before each scenario "
        "(default: a throwaway schema per scenario)",
    )
    parser.add_argument(
        "paths",
        nargs="*",
        type=Path,
        metavar="PATH",
        help="scenario file or folder (default: the engine's own scenarios, "
        "engine/conformance/scenarios)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the runner's command line; returns the exit status (0 only if none failed)."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.schema is not None and args.dsn is None:
        parser.error("--schema needs --dsn")
    if not args.paths:
        args.paths = [SCENARIOS]
    try:
        scenario_files(args.paths)
    except FileNotFoundError as exc:
        parser.error(str(exc))
    with tempfile.TemporaryDirectory(prefix="cairnq-conformance-") as folder:
        if args.dsn is not None:
            stores = postgres_stores(args.dsn, args.schema)
        else:
            stores = sqlite_stores(Path(folder))
        passed, failed = asyncio.run(run_paths(args.paths, stores))
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1
