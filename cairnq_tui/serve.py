"""``cairnq-tui serve TARGET``: the console in a browser, through textual-serve.

Each browser tab that opens the page gets its own console process on the
target (textual-serve starts ``cairnq-tui launch …`` per websocket). Those
consoles are read-only unless ``--allow-writes`` is given, and they never host
workers: ``--worker`` runs each worker once, in this server process, and the
tabs see it through the database like any other worker.

The server binds to 127.0.0.1 unless ``--host`` says otherwise, and answers only
its own page (``cairnq_tui.web``): a request naming another host, or sent by
another site's page, is refused before any console starts; at most
``--max-sessions`` tabs run at once; bound beyond loopback it also needs a token,
generated and printed in the URL unless ``--token`` gives one.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import socket
import sys
from functools import partial
from typing import Any

from cairnq_tui.exits import EXIT_BAD_TARGET, refused
from cairnq_tui.hosting import HostError, WorkerHost, run_hosting
from cairnq_tui.settings import SERVED_ENV
from cairnq_tui.target import (
    TargetError,
    cannot_open,
    check_target,
    make_store,
    parse_target,
)
from cairnq_tui.web import (
    DEFAULT_MAX_SESSIONS,
    Gate,
    GateError,
    WebConsole,
    check_token,
    is_loopback,
    new_token,
)
from engine.store import redact_dsn

LOOPBACK = "127.0.0.1"
#: Where ``serve`` reads a token when ``--token`` is not given (kept out of ``ps``).
TOKEN_ENV = "CAIRNQ_TUI_TOKEN"


def add_serve_parser(commands: Any, launch: argparse.ArgumentParser) -> None:
    """Add ``serve``: every ``launch`` option, plus where to listen."""
    serve = commands.add_parser(
        "serve",
        parents=[launch],
        add_help=False,
        help="serve the console to web browsers (one console per browser tab)",
        description="Serve the console on TARGET over HTTP with textual-serve; each browser "
        "tab gets its own console process. Read-only unless --allow-writes. --worker hosts "
        "each worker once, in the server process.",
    )
    serve.add_argument(
        "--host",
        default=LOOPBACK,
        help="address to listen on (default 127.0.0.1: this machine only)",
    )
    serve.add_argument("--port", type=_port, default=8000, help="port (default 8000)")
    serve.add_argument(
        "--allow-writes",
        action="store_true",
        help="let the browser consoles write (cancel, retry, submit, purge)",
    )
    serve.add_argument(
        "--public-url",
        metavar="URL",
        help="the URL browsers use to reach the server (default http://HOST:PORT); "
        "the server answers to its host name too",
    )
    serve.add_argument(
        "--max-sessions",
        type=_sessions,
        default=DEFAULT_MAX_SESSIONS,
        metavar="N",
        help=f"browser tabs (console processes) served at once (default {DEFAULT_MAX_SESSIONS})",
    )
    serve.add_argument(
        "--token",
        help="the token browsers need (default: $CAIRNQ_TUI_TOKEN; beyond loopback a new "
        "one is generated and printed in the URL; on loopback none is needed)",
    )


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port: {text!r}") from None
    if not 0 < port < 65536:
        raise argparse.ArgumentTypeError("a port is between 1 and 65535")
    return port


def _sessions(text: str) -> int:
    try:
        count = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of sessions: {text!r}") from None
    if not 1 <= count <= 1000:
        raise argparse.ArgumentTypeError("--max-sessions is between 1 and 1000")
    return count


def serve_gate(args: argparse.Namespace) -> tuple[Gate, str]:
    """The gate for ``args``'s address and token, and the URL to print (token included).

    Raises:
        GateError: a token that cannot guard the server.
    """
    given = args.token or os.environ.get(TOKEN_ENV) or None
    token = check_token(given) if given else None
    if token is None and not is_loopback(args.host):
        token = new_token()
    shown = args.host if args.host not in ("0.0.0.0", "::") else socket.gethostname()
    shown = f"[{shown}]" if ":" in shown else shown
    base = (args.public_url or f"http://{shown}:{args.port}").rstrip("/") + "/"
    gate = Gate.for_server(args.host, args.port, public_url=base, token=token)
    return gate, f"{base}?token={token}" if token else base


def console_command(args: argparse.Namespace, *, read_only: bool) -> list[str]:
    """The ``launch`` command line each browser tab runs (never with ``--worker``)."""
    command = [sys.executable, "-m", "cairnq_tui.cli", "launch"]
    if args.target:
        command.append(args.target)
    if args.config:
        command += ["--config", args.config]
    if args.schema:
        command += ["--schema", args.schema]
    for queue in args.queues or ():
        command += ["--queue", queue]
    if read_only:
        command.append("--read-only")
    command += ["--refresh", f"{args.refresh:g}"]
    if args.theme:
        command += ["--theme", args.theme]
    for queue, limit in args.max_depth:
        command += ["--max-depth", f"{limit}" if queue == "*" else f"{queue}={limit}"]
    return command


def serve(args: argparse.Namespace) -> int:
    """Check the target, start the hosted workers, then serve until interrupted."""
    from textual_serve.server import Server

    read_only = args.read_only or not args.allow_writes
    if args.target and redact_dsn(args.target) != args.target:
        # The tabs' command line is shown by ps and printed by textual-serve.
        return refused(
            "serve will not pass a password on the consoles' command line: "
            "drop it from the DSN and set PGPASSWORD, or name a target with password_env"
        )
    try:
        gate, url = serve_gate(args)
    except GateError as exc:
        return refused(str(exc))
    try:
        target = args.resolved or parse_target(args.target, args.schema)
        # A new SQLite file is created here when writes are allowed (or a worker runs).
        writes = bool(args.workers) or args.create
        asyncio.run(check_target(target, read_only=read_only and not writes, create=writes))
        host = None
        if args.workers:
            host = WorkerHost(
                args.workers,
                make_store=partial(make_store, target, read_only=False),
                target_text=target.raw,
            )
    except (TargetError, HostError) as exc:
        return refused(str(exc))
    except Exception as exc:  # never a traceback for the operator; say what broke
        print(cannot_open(args.target, exc), file=sys.stderr)
        return EXIT_BAD_TARGET
    os.environ[SERVED_ENV] = "1"  # the tabs' consoles inherit it: they host no worker
    name = args.named.name if args.named else target.display
    title = f"cairnq console · {name}"
    sessions = Server(shlex.join(console_command(args, read_only=read_only)), title=title)
    server = WebConsole(
        sessions,
        host=args.host,
        port=args.port,
        gate=gate,
        url=url,
        title=title,
        max_sessions=args.max_sessions,
        public_url=args.public_url,
    )
    return run_hosting(server, host)
