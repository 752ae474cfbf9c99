"""What ``cairnq-tui launch TARGET`` takes TARGET for, run as the installed command:
a DSN is never mistaken for a file, a password never shows (whole or in part),
and a refused open creates nothing."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cairnq_tui.target import TargetError, check_target, parse_target
from engine import CairnQ, CairnQError, PostgresStore, SQLiteStore, StoreUnavailable

SCRIPT = Path(sys.executable).with_name("cairnq-tui")


def launch(folder: Path, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``cairnq-tui launch ARGV`` in ``folder`` (stdin closed: a refusal never waits)."""
    return subprocess.run(
        [SCRIPT, "launch", *argv],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "PGCONNECT_TIMEOUT": "5"},
    )


def refused_in_one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    return done.stderr


@pytest.mark.parametrize(
    "dsn",
    [
        "host=127.0.0.1 port=1 user=postgres password=S3cret",  # no dbname; no server
        "host=nowhere.invalid password=S3cret",
        "user=postgres password='S3cret' host=127.0.0.1 port=1",
        "bogus=1 password=S3cret",  # not a libpq option: a bad DSN, still no file
        " sslmode = disable password=S3cret host=127.0.0.1 port=1",
    ],
)
def test_a_keyword_dsn_without_dbname_is_postgres_never_a_new_file(
    tmp_path: Path, dsn: str
) -> None:
    err = refused_in_one_line(launch(tmp_path, dsn))
    assert "S3cret" not in err and "***" in err
    assert list(tmp_path.iterdir()) == []  # no SQLite file named after the DSN


def test_a_keyword_dsn_without_dbname_reaches_the_server(tmp_path: Path, pg_dsn: str) -> None:
    from psycopg.conninfo import conninfo_to_dict

    params = conninfo_to_dict(pg_dsn)
    dsn = f"host={params.get('host', '127.0.0.1')} port={params.get('port', 5432)} "
    dsn += f"user={params.get('user', 'postgres')} password=S3cret"
    # The server's own database for the user (no cairnq tables there): refused as such.
    err = refused_in_one_line(launch(tmp_path, dsn))
    assert "has no cairnq tables" in err and "S3cret" not in err
    assert list(tmp_path.iterdir()) == []


def test_a_password_holding_at_signs_is_hidden_whole_in_libpqs_own_error(
    tmp_path: Path,
) -> None:
    dsn = "postgresql://bob:p@ss@word@nohost.invalid/db"
    err = refused_in_one_line(launch(tmp_path, dsn))
    for piece in ("p@ss", "ss@word", "word@"):
        assert piece not in err, err
    assert "postgresql://bob:***@nohost.invalid/db" in err
    assert err.count("nohost.invalid/db") == 1, err  # the target named once
    assert list(tmp_path.iterdir()) == []


async def test_the_store_hides_the_password_in_libpqs_error() -> None:
    store = PostgresStore("postgresql://bob:p@ss@word@nohost.invalid/db", connect_timeout_s=5)
    with pytest.raises(StoreUnavailable) as caught:
        await store.connect()
    await store.close()
    assert "resolve host" in str(caught.value) or "nohost" in str(caught.value)
    for piece in ("p@ss", "ss@word", "word@"):
        assert piece not in str(caught.value), caught.value


def test_an_empty_target_is_refused_and_creates_nothing(tmp_path: Path) -> None:
    for empty in ("", "   "):
        err = refused_in_one_line(launch(tmp_path, empty))
        assert "TARGET is empty" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("url", ["mysql://app:S3cret@db/tasks", "sqlite:///tasks.db"])
def test_a_url_of_another_scheme_is_refused_and_creates_nothing(tmp_path: Path, url: str) -> None:
    """Taken for a SQLite path, it printed its password and became folders on disk."""
    err = refused_in_one_line(launch(tmp_path, url))
    assert "is a URL the console cannot open" in err
    assert "S3cret" not in err
    for argv in (["tasks", url, "--json"], ["submit", url, "hello"]):
        done = subprocess.run(
            [SCRIPT, *argv], cwd=tmp_path, capture_output=True, text=True, timeout=120
        )
        assert "S3cret" not in refused_in_one_line(done)
    assert list(tmp_path.iterdir()) == []


# -- nothing is created by a refused open ----------------------------------------


async def make_database(path: Path, *names: str) -> None:
    """A cairnq database at ``path`` holding one task per name, closed cleanly."""
    store = SQLiteStore(path)
    await store.connect()
    try:
        client = CairnQ(store)
        for name in names:
            await client.submit(name, {})
    finally:
        await store.close()


def beside(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir())


@pytest.fixture
def mount(tmp_path: Path) -> Iterator[Callable[..., Path]]:
    """``mount(size)``: a tmpfs of ``size`` (unmounted after); root only."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    points: list[Path] = []

    def make(size: str = "1m") -> Path:
        point = tmp_path / f"mnt{len(points)}"
        point.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", point])
        if done.returncode != 0:
            pytest.skip("cannot mount a tmpfs here")
        points.append(point)
        return point

    yield make
    for point in points:
        subprocess.run(["umount", "-l", point], check=True)


async def test_a_read_only_file_is_refused_without_a_trace_and_opens_read_only(
    tmp_path: Path,
) -> None:
    db = tmp_path / "tasks.db"
    await make_database(db, "ok_task")
    db.chmod(0o444)
    before = db.read_bytes()
    err = refused_in_one_line(launch(tmp_path, str(db)))
    assert "read-only" in err and "--read-only" in err
    with pytest.raises(StoreUnavailable, match="not writable"):
        await SQLiteStore(db).connect()
    assert beside(db) == ["tasks.db"] and db.read_bytes() == before  # no -wal/-shm
    # --read-only opens it for inspection.
    assert await check_target(parse_target(str(db)), read_only=True) is None
    store = SQLiteStore(db, read_only=True)
    await store.connect()
    try:
        assert [t.name for t in await store.list()] == ["ok_task"]
    finally:
        await store.close()


async def test_a_wal_database_in_a_read_only_folder_opens_read_only(
    mount: Callable[..., Path], tmp_path: Path
) -> None:
    folder = mount()
    db = folder / "tasks.db"
    await make_database(db, "first", "second")
    assert beside(db) == ["tasks.db"]  # closed cleanly: the WAL was folded in
    subprocess.run(["mount", "-o", "remount,ro", folder], check=True)
    store = SQLiteStore(db, read_only=True)
    await store.connect()
    try:
        assert sorted(t.name for t in await store.list()) == ["first", "second"]
    finally:
        await store.close()
    assert await check_target(parse_target(str(db)), read_only=True) is None
    err = refused_in_one_line(launch(tmp_path, str(db)))
    assert "--read-only" in err
    assert beside(db) == ["tasks.db"]


@pytest.mark.parametrize("free_kb", [0, 12])
async def test_a_full_disk_leaves_no_file(
    mount: Callable[..., Path], tmp_path: Path, free_kb: int
) -> None:
    folder = mount("64k")
    filler = folder / "filler"
    # Fill the disk, then free what the case wants.
    with filler.open("wb", buffering=0) as out, contextlib.suppress(OSError):
        while True:
            out.write(b"\0" * 4096)
    if free_kb:
        os.truncate(filler, filler.stat().st_size - free_kb * 1024)
    err = refused_in_one_line(launch(tmp_path, str(folder / "new.db")))
    assert "new.db" in err
    assert beside(filler) == ["filler"]
    with pytest.raises(CairnQError):
        await SQLiteStore(folder / "other.db").connect()
    assert beside(filler) == ["filler"]


# -- an empty Postgres database: refused, or given the tables when asked -----------


def test_an_empty_postgres_database_is_refused_saying_how_to_create_it(
    tmp_path: Path, pg_database: str
) -> None:
    err = refused_in_one_line(launch(tmp_path, pg_database))
    assert "has no cairnq tables" in err and "--create" in err and "--worker" in err
    err = refused_in_one_line(launch(tmp_path, pg_database, "--create", "--read-only"))
    assert "--create cannot be used with --read-only" in err
    assert not tables_in(pg_database)


def tables_in(dsn: str, schema: str = "public") -> list[str]:
    import psycopg

    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "select table_name from information_schema.tables where table_schema = %s",
            (schema,),
        ).fetchall()
    return sorted(r[0] for r in rows)


@pytest.mark.parametrize("schema", [None, "ops"])
async def test_create_makes_the_tables_once_and_says_so(
    pg_database: str, schema: str | None
) -> None:
    target = parse_target(pg_database, schema)
    refused = "has no cairnq tables" if schema is None else r"wrong schema.*--create creates it"
    with pytest.raises(TargetError, match=refused):
        await check_target(target, read_only=False)
    notice = await check_target(target, read_only=False, create=True)
    assert notice is not None and notice.startswith("Created the cairnq tables in ")
    assert "cairnq_tasks" in tables_in(pg_database, schema or "public")
    # Once there, the target is simply a cairnq database (no second notice).
    assert await check_target(target, read_only=False, create=True) is None
    assert await check_target(target, read_only=True) is None


async def test_a_failed_open_removes_only_a_file_that_holds_nothing(tmp_path: Path) -> None:
    """What a store whose open failed may remove: never a database another process
    made of the same new path meanwhile (tables, or WAL content not yet folded in)."""
    import sqlite3

    from engine._sqlite_file import holds_nothing

    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    one_page = tmp_path / "page.db"
    sqlite3.connect(one_page).execute("pragma journal_mode=wal").close()
    foreign = tmp_path / "foreign.db"
    with contextlib.closing(sqlite3.connect(foreign)) as conn:
        conn.execute("create table t (x)")
        conn.commit()
    text = tmp_path / "text.db"
    text.write_text("not a database " * 400)
    live = tmp_path / "live.db"  # open: the schema sits in its WAL, the file is one page
    store = SQLiteStore(live)
    await store.connect()
    try:
        assert Path(f"{live}-wal").stat().st_size > 0
        assert holds_nothing(str(live)) is False
    finally:
        await store.close()
    assert holds_nothing(str(live)) is False  # closed: the tables are in the file
    assert holds_nothing(str(empty)) and holds_nothing(str(one_page))
    assert not holds_nothing(str(foreign)) and not holds_nothing(str(text))
    assert not holds_nothing(str(tmp_path / "missing.db"))
