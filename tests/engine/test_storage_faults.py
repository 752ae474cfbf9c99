"""Storage faults reach callers as engine errors with the right words and the cause.

A full disk (a small tmpfs), an I/O error (a file-size limit in a child
process), a damaged file and a lock held too long (another process's
``BEGIN EXCLUSIVE`` on a rollback-journal database; a Postgres ``lock_timeout``)
each raise ``StorageFull``, ``StorageError`` or ``StoreLocked`` with the
driver's error as ``__cause__``, never a raw ``sqlite3``/``psycopg`` error;
what was written before is intact and the store works again afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine import (
    PostgresStore,
    SQLiteStore,
    StorageError,
    StorageFull,
    StoreLocked,
    StoreUnavailable,
)
from engine.inspection import describe_sqlite_file


@pytest.fixture
def small_disk() -> Iterator[Path]:
    """A 1 MiB tmpfs (needs root, as the test machine has), unmounted after.

    Mounted in a folder of its own under the system's temp folder, open to
    other users (a local Postgres server writes a tablespace there).
    """
    mount = Path(tempfile.mkdtemp(prefix="cairnq-disk-"))
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1M,mode=0755", "tmpfs", str(mount)],
        capture_output=True,
        check=False,
    )
    if made.returncode != 0:
        mount.rmdir()
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)
        mount.rmdir()


def fill(folder: Path) -> Path:
    """A file taking every free byte of ``folder``'s file system."""
    filler = folder / "filler"
    with filler.open("wb", buffering=0) as out, contextlib.suppress(OSError):
        while True:
            out.write(b"\0" * 4096)
    return filler


async def test_a_full_disk_raises_storage_full(small_disk: Path) -> None:
    store = SQLiteStore(small_disk / "tasks.db")
    try:
        before = [(await store.submit(name="job", payload={"i": i})).id for i in range(5)]
        filler = fill(small_disk)
        results = await asyncio.gather(
            *(store.submit(name="job", payload={"i": i}) for i in range(5)),
            store.submit(name="big", payload={"x": "y" * 100_000}),
            return_exceptions=True,
        )
        failures = [r for r in results if isinstance(r, BaseException)]
        assert failures, "the full disk refused nothing"
        for error in failures:
            assert type(error) is StorageFull, repr(error)
            assert "the disk or the database is full" in str(error)
            assert isinstance(error.__cause__, sqlite3.OperationalError)
        with pytest.raises(StorageFull):
            await store.submit(name="big", payload={"x": "y" * 100_000})
        filler.unlink()
        after = await store.submit(name="job", payload={"i": "after"})
        listed = {t.id for t in await store.list(limit=100)}
        assert {*before, after.id} <= listed
    finally:
        await store.close()


IO_ERROR_CHILD = textwrap.dedent(
    """
    import asyncio, resource, signal, sys
    from engine import SQLiteStore

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails, EFBIG

    async def main():
        store = SQLiteStore(sys.argv[1])
        kept = await store.submit(name="job")
        resource.setrlimit(resource.RLIMIT_FSIZE, (400_000, resource.RLIM_INFINITY))
        try:
            await store.submit(name="big", payload={"x": "y" * 1_000_000})
        except Exception as exc:
            print(type(exc).__name__, type(exc.__cause__).__name__, exc, flush=True)
        resource.setrlimit(
            resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY)
        )
        print((await store.get(kept.id)).status, flush=True)
        await store.close()

    asyncio.run(main())
    """
)


def test_an_io_error_raises_storage_error(tmp_path: Path) -> None:
    child = subprocess.run(
        [sys.executable, "-c", IO_ERROR_CHILD, str(tmp_path / "tasks.db")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert child.returncode == 0, child.stderr
    said, status = child.stdout.splitlines()
    assert said.startswith("StorageError OperationalError ")
    assert "the disk reported an I/O error (SQLite: disk I/O error)" in said
    assert status == "queued"


async def test_a_damaged_file_raises_storage_error(tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    store = SQLiteStore(path)
    for i in range(200):
        await store.submit(name="job", payload={"text": f"{i}" * 500})
    await store.close()
    size = path.stat().st_size
    with path.open("r+b") as db:  # the task table's last pages: the schema stays readable
        db.seek(size - 16 * 4096)
        db.write(os.urandom(12 * 4096))
    damaged = SQLiteStore(path)
    try:
        with pytest.raises(StorageError, match="the database file is damaged") as info:
            await damaged.list(limit=1_000)
        assert isinstance(info.value.__cause__, sqlite3.DatabaseError)
    finally:
        await damaged.close()


HOLD_EXCLUSIVE = textwrap.dedent(
    """
    import sqlite3, sys, time
    conn = sqlite3.connect(sys.argv[1], isolation_level=None)
    conn.execute("begin exclusive")
    conn.execute("update cairnq_meta set value = value")
    print("held", flush=True)
    sys.stdin.readline()
    conn.execute("rollback")
    """
)


async def test_a_journal_database_held_exclusively_says_locked(tmp_path: Path) -> None:
    path = tmp_path / "journal.db"
    first = SQLiteStore(path)
    task = await first.submit(name="job")
    await first.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("pragma journal_mode = delete").fetchone() == ("delete",)
    with subprocess.Popen(
        [sys.executable, "-c", HOLD_EXCLUSIVE, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as holder:
        assert holder.stdin is not None and holder.stdout is not None
        try:
            assert holder.stdout.readline().strip() == "held"
            found = describe_sqlite_file(str(path))
            assert (found.kind, found.detail) == ("locked", "database is locked")
            store = SQLiteStore(path, busy_timeout_ms=300)
            with pytest.raises(
                StoreLocked, match=r"^database is locked: another connection"
            ) as info:
                await store.connect()
            assert isinstance(info.value, StoreUnavailable)  # what a caller opening it handles
            assert isinstance(info.value.__cause__, sqlite3.OperationalError)
        finally:
            holder.stdin.write("\n")
            holder.stdin.flush()
            holder.wait(timeout=30)
    assert describe_sqlite_file(str(path)).kind == "cairnq"
    reopened = SQLiteStore(path)
    try:
        got = await reopened.get(task.id)
        assert got is not None and got.status == "queued"
    finally:
        await reopened.close()


@pytest.mark.postgres
async def test_a_postgres_lock_timeout_raises_store_locked(pg_dsn: str) -> None:
    import psycopg

    schema = f"t_{uuid.uuid4().hex[:12]}"
    dsn = f"{pg_dsn}?options=-c%20lock_timeout%3D200"
    store = PostgresStore(dsn, schema=schema, max_size=4)
    try:
        kept = await store.submit(name="job")
        with psycopg.connect(pg_dsn, options=f"-c search_path={schema}") as holder:
            holder.execute("lock table cairnq_tasks in access exclusive mode")
            results = await asyncio.gather(
                store.submit(name="job"),
                store.submit(name="job", key="k"),
                store.cancel(kept.id),
                return_exceptions=True,
            )
            for error in results:
                assert type(error) is StoreLocked, repr(error)
                assert "a lock was held longer than lock_timeout" in str(error)
                assert isinstance(error.__cause__, psycopg.errors.LockNotAvailable)
            holder.rollback()
        assert (await store.submit(name="job")).status == "queued"
        assert (await store.get(kept.id)).status == "queued"  # type: ignore[union-attr]
    finally:
        await store.close()
        with psycopg.connect(pg_dsn, autocommit=True) as admin:
            admin.execute(f'drop schema if exists "{schema}" cascade')


@pytest.mark.postgres
async def test_a_full_postgres_disk_raises_storage_full(pg_dsn: str, small_disk: Path) -> None:
    # The server runs on this machine (as the test machine's does): a tablespace
    # on the 1 MiB tmpfs holds the schema's tables, so filling it fills "the disk".
    import psycopg

    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        data = admin.execute("show data_directory").fetchone()
        if data is None or not Path(str(data[0])).is_dir():
            pytest.skip("the Postgres server does not run on this machine")
        subprocess.run(["chown", "postgres:postgres", str(small_disk)], check=True)
        space, schema = f"ts_{uuid.uuid4().hex[:12]}", f"t_{uuid.uuid4().hex[:12]}"
        admin.execute(f"create tablespace {space} location '{small_disk}'")
        try:
            store = PostgresStore(
                f"{pg_dsn}?options=-c%20default_tablespace%3D{space}", schema=schema, max_size=4
            )
            try:
                kept = [(await store.submit(name="job", payload={"i": i})).id for i in range(3)]
                results = await asyncio.gather(
                    *(
                        store.submit(name="big", payload={"x": os.urandom(200_000).hex()})
                        for _ in range(8)
                    ),
                    return_exceptions=True,
                )
                failures = [r for r in results if isinstance(r, BaseException)]
                assert failures, "the full tablespace refused nothing"
                for error in failures:
                    assert type(error) is StorageFull, repr(error)
                    assert "the server's disk is full" in str(error)
                    assert isinstance(error.__cause__, psycopg.errors.DiskFull)
                listed = {t.id for t in await store.list(name="job", limit=10)}
                assert listed == set(kept)
            finally:
                await store.close()
        finally:
            admin.execute(f'drop schema if exists "{schema}" cascade')
            admin.execute(f"drop tablespace if exists {space}")
