"""Named targets: the TOML config file that ``launch prod`` and ``:`` read.

(What a TARGET is and how it is opened: ``target``; what the console then runs
with: ``settings``.)

The file lives at ``$XDG_CONFIG_HOME/cairnq-tui/config.toml`` (``~/.config/…``
when the variable is unset), or wherever ``--config`` points. Each
``[targets.NAME]`` table says where the database is (``path`` for SQLite;
``dsn`` and/or ``service`` for Postgres) and the defaults the console takes for
it. Passwords never sit in the file: ``password_env`` names an environment
variable read when the target is opened, and ``service``/``passfile`` hand the
lookup to libpq.

Every mistake is a ``ConfigError`` whose text is one line naming the file, the
line and the key (``config.toml:7: targets.prod.refresh: …``); the line of a
semantic error is found by scanning the file's text, since ``tomllib`` only
reports lines for syntax errors.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from cairnq_tui.settings import SERVED_ENV
from cairnq_tui.target import Target
from engine.store import redact_dsn

CONFIG_ENV = "XDG_CONFIG_HOME"
#: A target name: what ``launch NAME`` and ``:NAME`` accept.
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_HEADER = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]\s*(#.*)?$")
_ASSIGN = re.compile(r"^\s*((?:\"[^\"]*\"|'[^']*'|[A-Za-z0-9_.\-\s])+?)\s*=")
_TARGET_KEYS = {
    "path": "a SQLite file path",
    "dsn": "a postgres:// DSN or libpq key=value string",
    "service": "a libpq service name (pg_service.conf)",
    "passfile": "a libpq password file path",
    "password_env": "the name of an environment variable holding the password",
    "schema": "a Postgres schema name",
    "read_only": "true or false",
    "danger": "true or false",
    "queues": "a list of queue names",
    "refresh": "seconds between refreshes (0.05 to 3600)",
    "theme": "a Textual theme name",
    "max_depth": "a depth limit N, or a table {QUEUE = N}",
    "workers": "a list of MODULE:ATTR worker specs",
}


class ConfigError(Exception):
    """The config cannot be used; ``str()`` is one line for the operator."""


@dataclass(frozen=True, slots=True)
class NamedTarget:
    """One ``[targets.NAME]`` table, checked; ``open_target()`` reads its secret."""

    name: str
    source: Path
    path: str | None = None
    dsn: str | None = None
    service: str | None = None
    passfile: str | None = None
    password_env: str | None = None
    schema: str | None = None
    read_only: bool = False
    danger: bool = False
    queues: tuple[str, ...] = ()
    refresh: float | None = None
    theme: str | None = None
    max_depth: dict[str, int] = field(default_factory=dict)
    workers: tuple[str, ...] = ()
    #: The line of each key in the file (for errors found when the target is opened).
    key_lines: dict[str, int] = field(default_factory=dict)

    def _error(self, key: str, problem: str) -> ConfigError:
        line = self.key_lines.get(key, 0)
        return ConfigError(f"{self.source}:{line}: targets.{self.name}.{key}: {problem}")

    @property
    def where(self) -> str:
        """What the target points at, password-free (for lists and the status bar)."""
        if self.path is not None:
            return self.path
        shown = redact_dsn(self.dsn) if self.dsn else ""
        if self.service:
            shown = f"{shown} service={self.service}".strip()
        return shown

    def open_target(self, schema: str | None = None) -> Target:
        """The ``Target`` to open, with the password read from ``password_env`` now.

        Raises:
            ConfigError: ``password_env`` names a variable that is not set.
        """
        if self.path is not None:
            return Target(self.path, "sqlite", self.path)
        from psycopg.conninfo import make_conninfo

        extra: dict[str, str] = {}
        if self.service:
            extra["service"] = self.service
        if self.passfile:
            extra["passfile"] = os.path.expanduser(self.passfile)
        if self.password_env:
            password = os.environ.get(self.password_env)
            if password is None:
                raise self._error(
                    "password_env", f"environment variable {self.password_env} is not set"
                )
            extra["password"] = password
        try:
            conninfo = make_conninfo(self.dsn or "", **extra)
        except Exception as exc:  # psycopg.ProgrammingError: a malformed DSN
            raise self._error("dsn", redact_dsn(str(exc))) from None
        return Target(conninfo, "postgres", self.where, schema or self.schema)


@dataclass(frozen=True, slots=True)
class Config:
    """The named targets of one config file (empty when there is no file)."""

    path: Path
    targets: Mapping[str, NamedTarget]
    text: str = ""

    def get(self, name: str) -> NamedTarget:
        """The target called ``name``.

        Raises:
            ConfigError: no such target (the message lists the ones there are).
        """
        found = self.targets.get(name)
        if found is None:
            known = ", ".join(sorted(self.targets)) or "none"
            line = _line_of(self.text, ("targets",)) or 1
            raise ConfigError(
                f"{self.path}:{line}: targets.{name}: no such target (defined: {known})"
            )
        return found


def default_path() -> Path:
    """``$XDG_CONFIG_HOME/cairnq-tui/config.toml`` (``~/.config`` when unset)."""
    base = os.environ.get(CONFIG_ENV) or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "cairnq-tui" / "config.toml"


def load(path: str | os.PathLike[str] | None = None) -> Config:
    """Read and check the config file.

    Args:
        path: the file (``--config``); None means the default location, where a
            missing file is simply no named targets.

    Raises:
        ConfigError: unreadable file, TOML syntax, unknown key, wrong type.
    """
    file = Path(path) if path is not None else default_path()
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        if path is None:
            return Config(file, {})
        raise ConfigError(f"{file}: cannot read the config file: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(f"{file}: cannot read the config file: {reason}") from None
    return parse(text, file)


def parse(text: str, file: Path) -> Config:
    """Check a config file's text (``file`` is only named in messages)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(_syntax_message(file, exc)) from None
    for key in data:
        if key != "targets":
            _fail(file, text, (key,), "unknown key (the file holds [targets.NAME] tables)")
    tables = data.get("targets", {})
    if not isinstance(tables, dict):
        _fail(file, text, ("targets",), "expected tables [targets.NAME]")
    targets = {}
    for name, table in tables.items():
        if not _NAME.fullmatch(name):
            _fail(file, text, ("targets", name), "a target name is letters, digits, _ . -")
        if not isinstance(table, dict):
            _fail(file, text, ("targets", name), "expected a table [targets.NAME]")
        targets[name] = _target(file, text, name, table)
    return Config(file, targets, text)


def _target(file: Path, text: str, name: str, table: dict[str, Any]) -> NamedTarget:
    def fail(key: str, problem: str) -> NoReturn:
        _fail(file, text, ("targets", name, key), problem)

    for key in table:
        if key not in _TARGET_KEYS:
            fail(key, f"unknown key (known: {', '.join(_TARGET_KEYS)})")
    values: dict[str, Any] = {}
    for key in ("path", "dsn", "service", "passfile", "password_env", "schema", "theme"):
        if key in table:
            if not isinstance(table[key], str) or not table[key]:
                fail(key, f"expected {_TARGET_KEYS[key]} (a non-empty string)")
            values[key] = table[key]
    for key in ("read_only", "danger"):
        if key in table:
            if not isinstance(table[key], bool):
                fail(key, "expected true or false")
            values[key] = table[key]
    for key in ("queues", "workers"):
        if key in table:
            items = table[key]
            if not isinstance(items, list) or not all(isinstance(i, str) and i for i in items):
                fail(key, f"expected {_TARGET_KEYS[key]} (strings)")
            if key == "workers" and any(":" not in i for i in items):
                fail(key, "expected MODULE:ATTR for every worker")
            values[key] = tuple(items)
    if "refresh" in table:
        refresh = table["refresh"]
        if isinstance(refresh, bool) or not isinstance(refresh, int | float):
            fail("refresh", "expected a number of seconds")
        elif not 0.05 <= refresh <= 3600:
            fail("refresh", "must be between 0.05 and 3600 seconds")
        values["refresh"] = float(refresh)
    if "max_depth" in table:
        values["max_depth"] = _max_depth(table["max_depth"], lambda p: fail("max_depth", p))
    if "theme" in values:
        from textual.theme import BUILTIN_THEMES

        if values["theme"] not in BUILTIN_THEMES:
            fail("theme", f"unknown theme {values['theme']!r}")
    if "path" in values:
        for key in ("dsn", "service", "passfile", "password_env", "schema"):
            if key in values:
                fail(key, "applies to Postgres targets only (this one has a path)")
    elif "dsn" not in values and "service" not in values:
        _fail(file, text, ("targets", name), "needs a path (SQLite) or a dsn/service (Postgres)")
    if "dsn" in values and _has_password(values["dsn"]):
        fail("dsn", "holds a password in clear: use password_env, service or passfile")
    lines = {key: _line_of(text, ("targets", name, key)) or 0 for key in table}
    return NamedTarget(name=name, source=file, key_lines=lines, **values)


def _max_depth(value: Any, fail: Callable[[str], NoReturn]) -> dict[str, int]:
    limits = value if isinstance(value, dict) else {"*": value}
    for queue, limit in limits.items():
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            fail(f"expected {_TARGET_KEYS['max_depth']}, each limit an integer >= 1")
        if not queue:
            fail("a queue name cannot be empty")
    return dict(limits)


def _has_password(dsn: str) -> bool:
    return redact_dsn(dsn) != dsn


def _fail(file: Path, text: str, key: tuple[str, ...], problem: str) -> NoReturn:
    line = _line_of(text, key) or _line_of(text, key[:-1]) or 1
    raise ConfigError(f"{file}:{line}: {'.'.join(key)}: {problem}")


def _syntax_message(file: Path, exc: tomllib.TOMLDecodeError) -> str:
    found = re.search(r"\(at line (\d+), column (\d+)\)", str(exc))
    reason = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc))
    if found:
        return f"{file}:{found[1]}: TOML syntax error at column {found[2]}: {reason}"
    return f"{file}: TOML syntax error: {reason}"


def _line_of(text: str, key: tuple[str, ...]) -> int | None:
    """The 1-based line where the dotted ``key`` is defined (a header or ``key =``)."""
    table: tuple[str, ...] = ()
    for number, line in enumerate(text.splitlines(), start=1):
        header = _HEADER.match(line)
        if header:
            table = _split_key(header[1].lstrip("["))
            if table == key:
                return number
            continue
        assign = _ASSIGN.match(line)
        if assign and table + _split_key(assign[1]) == key:
            return number
    return None


def _split_key(dotted: str) -> tuple[str, ...]:
    parts = re.findall(r"\"([^\"]*)\"|'([^']*)'|([^.\s\"']+)", dotted)
    return tuple(a or b or c for a, b, c in parts)


def looks_literal(word: str) -> bool:
    """True when ``word`` can only be a path or DSN, never a target name."""
    return not _NAME.fullmatch(word) or word.startswith(".") or "/" in word


def resolve(word: str | None, config_path: str | None) -> NamedTarget | None:
    """The named target ``word`` means, or None when it is a literal path or DSN.

    A word that could be a name (letters, digits, ``_ . -``; no ``/``) is looked
    up in the config first: a name wins over a file of the same name (write
    ``./prod`` for the file). A bare word without a dot that is neither a name
    nor an existing file is a missing target when the config defines targets,
    rather than a new SQLite file created by a typo.

    Raises:
        ConfigError: the config is bad, or the name is missing from it.
    """
    if word is None or looks_literal(word):
        if config_path is not None:
            load(config_path)  # a bad --config is an error even when unused
        return None
    config = load(config_path)
    if word in config.targets:
        return config.targets[word]
    if config.targets and "." not in word and not os.path.exists(word):
        config.get(word)  # raises: no such target
    return None


def apply_to_args(args: Any) -> None:
    """Fill ``launch``/``serve`` options from the named target ``args.target`` names.

    What the command line gives wins; the target's defaults fill the rest
    (``read_only = true`` cannot be undone from the command line). Sets
    ``args.named`` (the ``NamedTarget`` or None) and ``args.resolved`` (the
    ``Target`` to open, or None for a literal path or DSN).

    Raises:
        ConfigError: a bad config, a missing target, or an unset ``password_env``.
    """
    named = resolve(args.target, args.config)
    args.named = named
    args.resolved = None
    if named is not None:
        args.resolved = named.open_target(args.schema)
        args.read_only = args.read_only or named.read_only
        args.queues = args.queues or list(named.queues)
        args.theme = args.theme or named.theme
        args.max_depth = args.max_depth or list(named.max_depth.items())
        if args.refresh is None:
            args.refresh = named.refresh
        served = os.environ.get(SERVED_ENV) == "1"
        if args.command == "launch" and not args.workers and not served:
            args.workers = list(named.workers) or None
    if args.refresh is None:
        args.refresh = 1.0


def settings_fields(args: Any) -> dict[str, Any]:
    """The ``Settings`` fields a named target adds (its name, danger flag, config)."""
    named: NamedTarget | None = getattr(args, "named", None)
    config_path = getattr(args, "config", None)
    return {
        "name": named.name if named else None,
        "danger": named.danger if named else False,
        "config_path": config_path,
    }
