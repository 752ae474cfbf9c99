"""Postgres helpers for tests, importable from any test folder (tests/ is on sys.path)."""

from __future__ import annotations

import os

import pytest

PG_DSN_ENV = "CAIRNQ_TEST_PG_DSN"


# One probe per DSN and process: why the server did not answer, or None if it did.
_unreachable: dict[str, str | None] = {}


def pg_dsn_or_skip() -> str:
    """The test server's DSN, or skip the test (saying why): no DSN configured, or a
    DSN no server answers (the README's test command names one even on a machine
    without Postgres). CAIRNQ_REQUIRE_PG=1 turns either skip into a failure."""
    dsn = os.environ.get(PG_DSN_ENV)
    if not dsn:
        pytest.skip(f"postgres: set {PG_DSN_ENV} to run")
    if dsn not in _unreachable:
        import psycopg

        try:
            psycopg.connect(dsn, connect_timeout=3, autocommit=True).close()
            _unreachable[dsn] = None
        except psycopg.OperationalError as exc:
            _unreachable[dsn] = " ".join(str(exc).split())[:200]
    reason = _unreachable[dsn]
    if reason is not None:
        pytest.skip(f"postgres: no server answers at {PG_DSN_ENV} ({reason})")
    return dsn


def dsn_for_database(dsn: str, database: str) -> str:
    """The same server DSN pointed at another database."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    params = conninfo_to_dict(dsn)
    params["dbname"] = database
    return make_conninfo(**params)
