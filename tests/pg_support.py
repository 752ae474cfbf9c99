"""Postgres helpers for tests, importable from any test folder (tests/ is on sys.path)."""

from __future__ import annotations

import os

import pytest

PG_DSN_ENV = "CAIRNQ_TEST_PG_DSN"


def pg_dsn_or_skip() -> str:
    """The test server's DSN, or skip the test (saying why) when none is configured."""
    dsn = os.environ.get(PG_DSN_ENV)
    if not dsn:
        pytest.skip(f"postgres: set {PG_DSN_ENV} to run")
    return dsn


def dsn_for_database(dsn: str, database: str) -> str:
    """The same server DSN pointed at another database."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    params = conninfo_to_dict(dsn)
    params["dbname"] = database
    return make_conninfo(**params)
