"""Named targets in the config file: what a good file gives ``launch``, and every bad
file ends in one line naming the file, the line and the key, with exit status 2."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cairnq_tui import named_targets
from cairnq_tui.cli import build_parser, main

GOOD = """\
# Two targets: a local file and a Postgres cluster.
[targets.local]
path = "{local}"
refresh = 2
queues = ["emails", "billing"]
theme = "nord"
max_depth = {{ emails = 500, "*" = 1000 }}

[targets.prod]
dsn = "postgresql://ops@db.internal/app"
schema = "cairnq"
read_only = true
danger = true
password_env = "CAIRNQ_TEST_PROD_PASSWORD"

[targets."svc"]
service = "prod"
passfile = "~/.pgpass"
workers = ["mymodule:make_worker"]
max_depth = 50
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def parsed_args(*argv: str) -> object:
    args = build_parser().parse_args(["launch", *argv])
    named_targets.apply_to_args(args)
    return args


def test_a_good_file_names_every_target(tmp_path: Path) -> None:
    found = named_targets.load(write(tmp_path, GOOD.format(local=tmp_path / "l.db")))
    assert sorted(found.targets) == ["local", "prod", "svc"]
    local = found.targets["local"]
    assert local.path == str(tmp_path / "l.db") and local.refresh == 2.0
    assert local.queues == ("emails", "billing") and local.theme == "nord"
    assert local.max_depth == {"emails": 500, "*": 1000}
    prod = found.targets["prod"]
    assert (prod.schema, prod.read_only, prod.danger) == ("cairnq", True, True)
    svc = found.targets["svc"]
    assert svc.workers == ("mymodule:make_worker",) and svc.max_depth == {"*": 50}
    assert svc.open_target().raw == f"service=prod passfile={os.path.expanduser('~/.pgpass')}"


def test_the_password_comes_from_the_environment_and_is_never_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found = named_targets.load(write(tmp_path, GOOD.format(local="l.db")))
    monkeypatch.setenv("CAIRNQ_TEST_PROD_PASSWORD", "s3cret word")
    target = found.targets["prod"].open_target()
    assert "password='s3cret word'" in target.raw and "dbname=app" in target.raw
    assert target.display == "postgresql://ops@db.internal/app"
    assert target.schema == "cairnq"
    assert "s3cret" not in found.targets["prod"].where


def test_target_defaults_fill_what_the_command_line_leaves_out(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD.format(local=tmp_path / "l.db"))
    args = parsed_args("--config", str(path), "local")
    assert args.resolved.raw == str(tmp_path / "l.db")  # type: ignore[attr-defined]
    assert args.refresh == 2.0 and args.theme == "nord"  # type: ignore[attr-defined]
    assert args.queues == ["emails", "billing"]  # type: ignore[attr-defined]
    assert dict(args.max_depth) == {"emails": 500, "*": 1000}  # type: ignore[attr-defined]
    args = parsed_args("--config", str(path), "local", "--refresh", "5", "--queue", "x")
    assert args.refresh == 5.0 and args.queues == ["x"]  # type: ignore[attr-defined]
    args = parsed_args("--config", str(path), "svc")
    assert args.workers == ["mymodule:make_worker"]  # type: ignore[attr-defined]


def test_a_name_wins_over_a_file_of_the_same_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path, GOOD.format(local=tmp_path / "l.db"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "local").write_bytes(b"")
    assert named_targets.resolve("local", str(path)) is not None
    assert named_targets.resolve("./local", str(path)) is None  # the file, written as a path
    assert named_targets.resolve(str(tmp_path / "other.db"), str(path)) is None
    assert named_targets.resolve("new.db", str(path)) is None  # a new file, not a name
    (tmp_path / "plainfile").write_bytes(b"")
    assert named_targets.resolve("plainfile", str(path)) is None


def test_no_config_file_at_the_default_location_means_no_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "nowhere"))
    assert named_targets.resolve("anything", None) is None
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    (tmp_path / "cairnq-tui").mkdir()
    write(tmp_path / "cairnq-tui", GOOD.format(local="l.db"))
    assert named_targets.default_path() == tmp_path / "cairnq-tui" / "config.toml"
    found = named_targets.resolve("prod", None)
    assert found is not None and found.danger


#: (file text, line, key, words of the problem); each launched as ``launch prod``.
BAD = {
    "unknown key": (
        '[targets.prod]\npath = "a.db"\ncolour = "red"\n',
        3,
        "targets.prod.colour",
        "unknown key",
    ),
    "unknown top-level key": (
        'verbose = true\n[targets.prod]\npath = "a.db"\n',
        1,
        "verbose",
        "unknown key",
    ),
    "wrong type": (
        '[targets.prod]\npath = "a.db"\n\nrefresh = "fast"\n',
        4,
        "targets.prod.refresh",
        "expected a number",
    ),
    "wrong type of list": (
        '[targets.prod]\npath = "a.db"\nqueues = "emails"\n',
        3,
        "targets.prod.queues",
        "list of queue names",
    ),
    "refresh out of range": (
        '[targets.prod]\npath = "a.db"\nrefresh = 0\n',
        3,
        "targets.prod.refresh",
        "between 0.05 and 3600",
    ),
    "bool as string": (
        '[targets.prod]\n path = "a.db"\n  danger = "yes"\n',
        3,
        "targets.prod.danger",
        "true or false",
    ),
    "bad max_depth": (
        '[targets.prod]\npath = "a.db"\nmax_depth = { emails = 0 }\n',
        3,
        "targets.prod.max_depth",
        ">= 1",
    ),
    "unknown theme": (
        '[targets.prod]\npath = "a.db"\ntheme = "purple"\n',
        3,
        "targets.prod.theme",
        "unknown theme",
    ),
    "no location": ("[targets.prod]\nread_only = true\n", 1, "targets.prod", "needs a path"),
    "password in clear": (
        '[targets.other]\npath = "b.db"\n[targets.prod]\ndsn = "postgresql://ops:hunter2@db/app"\n',
        4,
        "targets.prod.dsn",
        "password in clear",
    ),
    "schema on a file": (
        '[targets.prod]\npath = "a.db"\nschema = "x"\n',
        3,
        "targets.prod.schema",
        "Postgres targets only",
    ),
    "dotted key": (
        '[targets]\nprod.path = "a.db"\nprod.refresh = true\n',
        3,
        "targets.prod.refresh",
        "expected a number",
    ),
    "missing target": (
        '[targets.staging]\npath = "a.db"\n',
        1,
        "targets.prod",
        "no such target (defined: staging)",
    ),
    "password_env unset": (
        '[targets.prod]\ndsn = "postgresql://ops@db/app"\n'
        'password_env = "CAIRNQ_TEST_UNSET_VARIABLE"\n',
        3,
        "targets.prod.password_env",
        "is not set",
    ),
    "malformed dsn": (
        '[targets.prod]\nschema = "s"\ndsn = "host=db nonsense=1"\n',
        3,
        "targets.prod.dsn",
        'invalid connection option "nonsense"',
    ),
    "TOML syntax": (
        '[targets.prod]\npath = "a.db"\nrefresh = = 2\n',
        3,
        "TOML syntax error",
        "column",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_config_is_one_line_with_file_line_and_key(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text, line, key, problem = BAD[case]
    path = write(tmp_path, text)
    os.environ.pop("CAIRNQ_TEST_UNSET_VARIABLE", None)
    assert main(["launch", "--config", str(path), "prod"]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith(f"cairnq-tui: {path}:{line}: {key}"), lines[0]
    assert problem in lines[0]
    assert "hunter2" not in captured.err and "Traceback" not in captured.err
    assert not (tmp_path / "a.db").exists()  # nothing was opened or created


@pytest.mark.parametrize("kind", ["missing", "directory", "not utf-8"])
def test_an_unreadable_config_file_is_one_line(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "config.toml"
    if kind == "directory":
        path.mkdir()
    elif kind == "not utf-8":
        path.write_bytes(b'[targets.prod]\npath = "\xff.db"\n')
    # Even a literal path is refused when the --config it names cannot be read.
    assert main(["launch", "--config", str(path), str(tmp_path / "x.db")]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"cairnq-tui: {path}: cannot read")
    assert not (tmp_path / "x.db").exists()


def test_serve_reads_the_same_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, BAD["unknown key"][0])
    assert main(["serve", "--config", str(path), "prod"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"cairnq-tui: {path}:3: targets.prod.colour: unknown key")


def test_serve_refuses_a_password_it_would_put_on_a_command_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["serve", "postgresql://ops:hunter2@127.0.0.1:1/app"]) == 2
    err = capsys.readouterr().err
    assert "PGPASSWORD" in err and "hunter2" not in err and len(err.splitlines()) == 1
