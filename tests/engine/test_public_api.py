"""The public surface, pinned: what ``engine``, ``engine.inspection``, ``engine.snapshots``
and ``engine.store`` export, and where the version comes from.

A name added to or dropped from a public module shows up here as a failing
diff, so the change is a decision (and a CHANGELOG line), not an accident.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import tomllib
from importlib.metadata import version
from pathlib import Path

import engine
import engine.inspection
import engine.snapshots
import engine.store

REPO = Path(__file__).resolve().parents[2]

# The cairnq Python SDK's names (errors included), plus the engine's own
# StoreUnavailable, NotQueued and __version__, and active_waits (the process's wait registry).
ENGINE_ALL = {
    "AlreadyExists",
    "CONFLICTS",
    "CairnQ",
    "CairnQError",
    "Conflict",
    "LostLease",
    "NotQueued",
    "PostgresStore",
    "ProtocolVersionMismatch",
    "QueueFull",
    "Retention",
    "RetentionRule",
    "SQLiteStore",
    "STATUSES",
    "SchemaMismatch",
    "SerializationError",
    "StorageError",
    "StorageFull",
    "StoreClosed",
    "StoreLocked",
    "StoreUnavailable",
    "SubmitAction",
    "SubmitOutcome",
    "Task",
    "TaskCanceled",
    "TaskContext",
    "TaskDef",
    "TaskError",
    "TaskFailed",
    "TaskRef",
    "TaskStatus",
    "TaskStore",
    "TaskTimeout",
    "UnsupportedBackend",
    "WatchSignal",
    "Worker",
    "__version__",
    "active_waits",
    "is_terminal_status",
}

INSPECT_ALL = {
    "DEFAULT_COUNT_CAP",
    "DEFAULT_ERROR_WINDOW",
    "DEFAULT_SEARCH_WINDOW",
    "DEFAULT_NAMES_PER_QUEUE",
    "DEFAULT_METRICS_CAP",
    "SEARCH_KINDS",
    "SORT_KEYS",
    "WINDOWS",
    "CappedCount",
    "ChildRef",
    "FailureGroup",
    "FailureGroups",
    "FailureSelection",
    "Inspector",
    "KeyEntry",
    "KeyPage",
    "Latency",
    "LeaseInfo",
    "MetricSeries",
    "Metrics",
    "PageOrder",
    "QueueLatency",
    "SQLiteFileKind",
    "SearchKind",
    "SortKey",
    "TaskDetail",
    "TaskFilter",
    "TaskPage",
    "TaskSummary",
    "ThroughputBucket",
    "UndecodableJSON",
    "WorkerLeases",
    "describe_sqlite_file",
    "mask_message",
    "parse_duration",
}

SNAPSHOTS_ALL = {
    "AbandonedThread",
    "CallSnapshot",
    "CallTaskSnapshot",
    "ErrorReport",
    "NameSnapshot",
    "ResourceHolder",
    "ResourceSnapshot",
    "WaitSnapshot",
    "WorkerSnapshot",
}


def test_engine_exports_the_sdk_names_and_its_own_errors() -> None:
    assert set(engine.__all__) == ENGINE_ALL
    assert len(engine.__all__) == len(ENGINE_ALL)  # no duplicates
    for name in engine.__all__:
        assert hasattr(engine, name), name


def test_introspection_lives_in_its_own_modules() -> None:
    assert set(engine.inspection.__all__) == INSPECT_ALL
    assert set(engine.snapshots.__all__) == SNAPSHOTS_ALL
    for module in (engine.inspection, engine.snapshots):
        for name in module.__all__:
            assert hasattr(module, name), f"{module.__name__}.{name}"
    # Neither is reachable from the top level any more.
    assert not INSPECT_ALL & set(engine.__all__)
    assert not SNAPSHOTS_ALL & set(engine.__all__)
    assert not hasattr(engine, "Inspector")
    assert not hasattr(engine, "WorkerSnapshot")


def test_the_store_package_keeps_its_internals_private() -> None:
    assert set(engine.store.__all__) == {
        "PostgresStore",
        "SQLiteStore",
        "StoreCapabilities",
        "TaskStore",
        "WatchSignal",
        "redact_dsn",
    }
    for internal in ("Draw", "NewTask", "Plan", "Signals"):
        assert not hasattr(engine.store, internal), internal


def test_version_is_the_distribution_version() -> None:
    declared = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    expected = declared["project"]["version"]
    assert version("cairnq-tui") == expected
    assert engine.__version__ == expected

    import cairnq_tui

    assert cairnq_tui.__version__ == expected


def test_version_falls_back_when_the_distribution_is_not_installed() -> None:
    # A source tree that was never pip-installed has no metadata: importing still works.
    probe = textwrap.dedent(
        """
        import importlib.metadata as md

        def missing(name):
            raise md.PackageNotFoundError(name)

        md.version = missing
        import engine, cairnq_tui
        print(engine.__version__, cairnq_tui.__version__)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["0.0.0+unknown", "0.0.0+unknown"]
