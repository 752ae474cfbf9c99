"""Fixtures of the reliability scenarios: a private Postgres server, ledger folders."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from pg_support import pg_dsn_or_skip
from reliability_harness import PG_BIN, PrivatePostgres, Target


@pytest.fixture(scope="session")
def private_pg() -> Iterator[PrivatePostgres]:
    """A PostgreSQL cluster of our own (temp folder, own port), removed afterwards.

    Scenario 3 restarts it mid-run; the machine's main server is never touched.
    """
    if not (PG_BIN / "initdb").exists() or (shutil.which("runuser") is None):
        pytest.skip(f"no PostgreSQL binaries in {PG_BIN} (set CAIRNQ_PG_BIN)")
    server = PrivatePostgres().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def ledger_dir(tmp_path: Path) -> Path:
    """Where this test's processes append their JSONL ledgers."""
    return tmp_path / "ledger"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Target]:
    """A fresh database of each dialect: a new SQLite file, or a throwaway schema."""
    if request.param == "sqlite":
        yield Target("sqlite", str(tmp_path / "tasks.db"))
        return
    dsn = pg_dsn_or_skip()
    schema = f"rel_{uuid.uuid4().hex[:12]}"
    yield Target("postgres", dsn, schema)
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'drop schema if exists "{schema}" cascade')
