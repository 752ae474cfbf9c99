"""``cairnq-tui launch``: every bad target ends in one short message and exit 2,
never a traceback, never a password on screen, and never a write to a database
that is not a cairnq one."""

from __future__ import annotations

import asyncio
import hashlib
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from cairnq_tui import __version__
from cairnq_tui.cli import main
from cairnq_tui.target import TargetError, check_target, make_store, parse_target
from engine import PostgresStore
from engine.store import redact_dsn

SCRIPT = Path(sys.executable).with_name("cairnq-tui")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(["launch", *argv])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) <= 4, err
    return code, err


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_help_and_version() -> None:
    out = subprocess.run([SCRIPT, "--help"], capture_output=True, text=True, check=True).stdout
    assert "launch" in out
    out = subprocess.run([SCRIPT, "launch", "--help"], capture_output=True, text=True, check=True)
    for option in ("--schema", "--queue", "--read-only", "--refresh", "--theme"):
        assert option in out.stdout
    version = subprocess.run([SCRIPT, "--version"], capture_output=True, text=True, check=True)
    assert version.stdout.strip() == f"cairnq-tui {__version__}"


def test_a_foreign_sqlite_file_is_refused_and_left_untouched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "app.db"
    conn = sqlite3.connect(path)
    conn.execute("create table users (id integer primary key, name text)")
    conn.commit()
    conn.close()
    before = digest(path)
    code, err = run(capsys, str(path))
    assert code == 2
    assert "not a cairnq one" in err and "users" in err
    assert digest(path) == before and not Path(f"{path}-wal").exists()
    conn = sqlite3.connect(path)
    assert conn.execute("pragma journal_mode").fetchone()[0] == "delete"
    conn.close()


@pytest.mark.parametrize(
    ("setup", "expected"),
    [
        ("text", "is not a SQLite database"),
        ("directory", "it is a directory"),
        ("missing-read-only", "--read-only cannot create it"),
        ("protocol-2", "another cairnq protocol"),
    ],
)
def test_bad_sqlite_targets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], setup: str, expected: str
) -> None:
    path = tmp_path / "x.db"
    extra: list[str] = []
    if setup == "text":
        path.write_text("hello, not a database\n" * 100)
    elif setup == "directory":
        path.mkdir()
    elif setup == "missing-read-only":
        extra = ["--read-only"]
    else:
        asyncio.run(check_target(parse_target(str(path)), read_only=False))
        conn = sqlite3.connect(path)
        conn.execute("update cairnq_meta set value = '2' where key = 'protocol_version'")
        conn.commit()
        conn.close()
    code, err = run(capsys, str(path), *extra)
    assert code == 2 and expected in err, err
    if setup == "missing-read-only":
        assert not path.exists()


def test_bad_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run(capsys, str(tmp_path / "a.db"), "--schema", "s1")
    assert code == 2 and "--schema applies to Postgres" in err
    code, err = run(capsys, str(tmp_path / "a.db"), "--theme", "no-such-theme")
    assert code == 2 and "unknown theme" in err and not (tmp_path / "a.db").exists()
    with pytest.raises(SystemExit) as exc:
        main(["launch", "--refresh", "0"])
    assert exc.value.code == 2


def test_the_default_target_is_created_with_a_notice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    target = parse_target(None)
    assert target.raw == "tasks.db"
    notice = asyncio.run(check_target(target, read_only=False))
    assert notice is not None and str(tmp_path / "tasks.db") in notice
    assert asyncio.run(check_target(target, read_only=False)) is None  # exists now


def test_passwords_are_redacted() -> None:
    assert redact_dsn("postgresql://bob:s3cret@db:5432/x") == "postgresql://bob:***@db:5432/x"
    assert redact_dsn("host=db password=s3cret dbname=x") == "host=db password=*** dbname=x"
    # A password containing '@' is hidden whole, in the console's title too.
    dsn = "postgresql://u:p@ss@h/db"
    assert (
        redact_dsn(f"cannot open {dsn}: refused") == "cannot open postgresql://u:***@h/db: refused"
    )
    assert parse_target(dsn).display == "postgresql://u:***@h/db"
    assert parse_target("postgres://bob:s3cret@h/x").display == "postgres://bob:***@h/x"


def test_an_unreachable_postgres_never_shows_its_password(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, err = run(capsys, "postgresql://bob:s3cret@127.0.0.1:1/nowhere")
    assert code == 2 and "is unavailable" in err
    assert "s3cret" not in err and "***" in err
    assert err.count("127.0.0.1:1/nowhere") == 1, err  # the target named once


def test_postgres_wrong_schema_is_refused_and_not_created(
    pg_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    schema = "cq_no_such_schema_" + os.urandom(4).hex()
    code, err = run(capsys, pg_dsn, "--schema", schema)
    assert code == 2 and "wrong schema" in err and schema in err
    with psycopg.connect(pg_dsn) as conn:
        found = conn.execute("select 1 from pg_namespace where nspname = %s", (schema,)).fetchone()
    assert found is None


def test_postgres_tables_in_another_schema_is_a_schema_mismatch(
    pg_database: str, capsys: pytest.CaptureFixture[str]
) -> None:
    async def install() -> None:
        store = PostgresStore(pg_database, schema="elsewhere")
        await store.connect()
        await store.close()

    asyncio.run(install())
    code, err = run(capsys, pg_database)
    assert code == 2 and "wrong schema" in err
    # Pointed at the right schema, the same database is accepted.
    target = parse_target(pg_database, "elsewhere")
    assert asyncio.run(check_target(target, read_only=True)) is None


def test_postgres_database_without_cairnq(
    pg_database: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = run(capsys, pg_database)
    assert code == 2 and "has no cairnq tables" in err


def test_depth_limits_parse() -> None:
    from cairnq_tui.cli import build_parser

    args = build_parser().parse_args(["launch", "--max-depth", "emails=100", "--max-depth", "5"])
    assert dict(args.max_depth) == {"emails": 100, "*": 5}
    with pytest.raises(SystemExit):
        build_parser().parse_args(["launch", "--max-depth", "emails=0"])


def test_synchronous_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = parse_target(str(tmp_path / "a.db"))
    assert make_store(target, read_only=False).synchronous == "full"  # type: ignore[attr-defined]
    chosen = make_store(target, read_only=False, synchronous="normal")
    assert chosen.synchronous == "normal"  # type: ignore[attr-defined]
    code, err = run(capsys, "postgresql://u@127.0.0.1:1/x", "--synchronous", "normal")
    assert code == 2 and "--synchronous applies to SQLite targets only" in err
    with pytest.raises(SystemExit) as exc:
        main(["launch", str(tmp_path / "a.db"), "--synchronous", "off"])
    assert exc.value.code == 2
    assert not (tmp_path / "a.db").exists()


def test_a_missing_folder_is_an_error_and_nothing_is_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "nonexistent" / "dir"
    with pytest.raises(TargetError, match="does not exist"):
        asyncio.run(check_target(parse_target(str(folder / "x.db")), read_only=False))
    assert not (tmp_path / "nonexistent").exists()
    code, err = run(capsys, str(folder / "x.db"))
    assert code == 2 and "does not exist" in err and str(folder) in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "nonexistent").exists()
    # A new file in a folder that exists is still created, with its notice.
    notice = asyncio.run(check_target(parse_target(str(tmp_path / "y.db")), read_only=False))
    assert notice is not None and "Created a new cairnq database" in notice


def test_a_wrong_schema_names_the_target_once_and_the_schema_looked_in(
    pg_database: str, capsys: pytest.CaptureFixture[str]
) -> None:
    async def install() -> None:
        store = PostgresStore(pg_database, schema="elsewhere")
        await store.connect()
        await store.close()

    asyncio.run(install())
    shown = redact_dsn(pg_database)
    code, err = run(capsys, pg_database, "--schema", "nosuch")
    assert code == 2 and err.count(shown) == 1, err
    assert "looked in schema 'nosuch'" in err and "--schema" in err
    code, err = run(capsys, pg_database)
    assert code == 2 and err.count(shown) == 1, err
    assert "looked in schema 'public'" in err and "elsewhere" in err
    assert "pass --schema elsewhere" in err
