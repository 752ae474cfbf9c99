"""Fixtures for interop with the real cairnq SDK (0.15.1, the ``peer`` extra).

``backend`` is one shared database per test, on SQLite and on Postgres; ``pair``
opens a cairnq store and then an engine store on it (so cairnq created it).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from interop_support import Backend, Pair


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    if request.param == "sqlite":
        return Backend("sqlite", str(tmp_path / "shared.db"))
    return Backend(
        "postgres", request.getfixturevalue("pg_dsn"), request.getfixturevalue("pg_schema")
    )


@pytest.fixture
async def pair(backend: Backend) -> AsyncIterator[Pair]:
    peer = backend.peer()
    await peer.connect()
    engine = backend.engine()
    try:
        await engine.connect()
        yield Pair(engine, peer)
    finally:
        await engine.close()
        await peer.close()


@pytest.fixture
def pg_two_schemas(pg_dsn: str) -> Iterator[tuple[str, str]]:
    """Two fresh schema names in the test database (the stores create them), dropped after."""
    import psycopg

    names = (f"t_{uuid.uuid4().hex[:12]}", f"t_{uuid.uuid4().hex[:12]}")
    yield names
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        for name in names:
            conn.execute(f'drop schema if exists "{name}" cascade')
