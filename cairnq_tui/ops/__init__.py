"""The operator's command line: the console's reads and writes as subcommands.

``tasks``, ``show``, ``submit``, ``cancel``, ``retry``, ``purge``, ``stats``,
``failures`` and ``doctor`` open the same targets as ``launch`` and go through
the same engine reads (``Inspector``) and the same writes (``cairnq_tui.actions``)
as the console. ``add_parsers`` registers them; ``run`` runs the one parsed.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import textwrap
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, NoReturn

from cairnq_tui.ops import _doctor, _failures, _stats, _tasks, _writes
from cairnq_tui.ops._common import EXIT_BAD_INPUT, EXIT_FAILED, BadInput, Refused
from engine.store import redact_dsn

COMMANDS = ("tasks", "show", "submit", "cancel", "retry", "purge", "stats", "failures", "doctor")

_EXAMPLES = {
    "tasks": "cairnq-tui tasks prod --status failed --name send_email --limit 20 --json",
    "show": "cairnq-tui show ./tasks.db task_01J9ZQ4M5N6P7Q8R9S0T1V2W3X",
    "submit": 'cairnq-tui submit ./tasks.db send_email --payload \'{"to": "a@b.c"}\' '
    "--key welcome-42 --on-conflict reject",
    "cancel": "cairnq-tui cancel prod --queue emails --status queued --dry-run",
    "retry": "cairnq-tui retry prod --status failed --name send_email --yes --confirm-target prod",
    "purge": "cairnq-tui purge ./tasks.db --older-than 7d --status succeeded --limit 100000 --yes\n"
    "  cairnq-tui purge prod task_01J9ZQ4M5N6P7Q8R9S0T1V2W3X --dry-run",
    "stats": "cairnq-tui stats postgresql://app@db/app --json",
    "failures": "cairnq-tui failures prod --since 24h",
    "doctor": "cairnq-tui doctor prod || echo 'needs attention'",
}


def example(command: str) -> str:
    """The ``--help`` epilog of ``command``."""
    return f"example:\n  {_EXAMPLES[command]}"


#: The subcommands' parsers, by name (for errors found after parsing).
_PARSERS: dict[str, argparse.ArgumentParser] = {}


def _one_line_errors(parser: argparse.ArgumentParser) -> None:
    """Bad flags: one ``cairnq-tui:`` line on stderr and status 2 (no usage block)."""
    prog = parser.prog

    def error(message: str) -> NoReturn:
        parser.exit(
            EXIT_BAD_INPUT,
            f"cairnq-tui: {prog.removeprefix('cairnq-tui ')}: {message} (see --help)\n",
        )

    parser.error = error  # type: ignore[method-assign]


def add_parsers(commands: Any) -> None:
    """Register every operator subcommand on the ``cairnq-tui`` subparsers."""
    _tasks.add_parser(commands, example("tasks"))
    _tasks.add_show_parser(commands, example("show"))
    _writes.add_submit_parser(commands, example("submit"))
    for verb in ("cancel", "retry"):
        _writes.add_bulk_parser(commands, verb, example(verb))
    _writes.add_purge_parser(commands, example("purge"))
    _stats.add_parser(commands, example("stats"))
    _failures.add_parser(commands, example("failures"))
    _doctor.add_parser(commands, example("doctor"))
    for command in COMMANDS:
        if command in commands.choices:
            _PARSERS[command] = commands.choices[command]
            # The help keeps the example's layout (raw text), so wrap the prose here.
            sub = commands.choices[command]
            sub.description = textwrap.fill(sub.description or "", 79)
            _one_line_errors(commands.choices[command])


def parse_args(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """``parser.parse_args``, except that task ids may also follow the options
    (``cancel DSN --schema s ID ID``) and ``--sort -created`` means descending,
    which argparse alone does not allow."""
    words = list(sys.argv[1:] if argv is None else argv)
    # "--sort -completed": argparse would take "-completed" for an option.
    for i in range(len(words) - 1, 0, -1):
        if words[i - 1] == "--sort" and words[i].startswith("-"):
            words[i - 1 : i + 1] = [f"--sort={words[i]}"]
    args, extra = parser.parse_known_args(words)
    if extra:
        ids = getattr(args, "ids", None)
        if ids is None or any(word.startswith("-") for word in extra):
            sub = _PARSERS.get(args.command, parser)
            sub.error(f"unrecognized arguments: {' '.join(extra)}")
        args.ids = [*ids, *extra]
    return args


_RUNNERS: dict[str, Callable[[argparse.Namespace], Coroutine[Any, Any, int]]] = {
    "tasks": _tasks.run_tasks,
    "show": _tasks.run_show,
    "submit": _writes.run_submit,
    "cancel": _writes.run_bulk,
    "retry": _writes.run_bulk,
    "purge": _writes.run_purge,
    "stats": _stats.run,
    "failures": _failures.run,
    "doctor": _doctor.run,
}


def run(args: argparse.Namespace) -> int:
    """Run the parsed subcommand; its exit status (0, 1 or 2)."""
    try:
        return asyncio.run(_RUNNERS[args.command](args))
    except BadInput as exc:
        print(f"cairnq-tui: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Refused as exc:
        print(f"cairnq-tui: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # never a traceback: the failure in one line, no password
        print(
            f"cairnq-tui: {args.command} failed: {type(exc).__name__}: {redact_dsn(str(exc))}",
            file=sys.stderr,
        )
        return EXIT_FAILED
