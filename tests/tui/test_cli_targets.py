"""What ``cairnq-tui launch TARGET`` takes TARGET for, run as the installed command:
a DSN is never mistaken for a file, a password never shows (whole or in part),
and a refused open creates nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine import PostgresStore, StoreUnavailable

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
