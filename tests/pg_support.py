"""Postgres helpers for tests, importable from any test folder (tests/ is on sys.path)."""

from __future__ import annotations


def dsn_for_database(dsn: str, database: str) -> str:
    """The same server DSN pointed at another database."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    params = conninfo_to_dict(dsn)
    params["dbname"] = database
    return make_conninfo(**params)
