"""``cairnq-tui serve``: what each browser tab's console is started with, and a
``--worker`` hosted once, by the server process, however many tabs are open."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import aiohttp
import pytest
from browser_support import serving, tab_consoles

from cairnq_tui import named_targets
from cairnq_tui.cli import build_parser
from cairnq_tui.serve import console_command
from cairnq_tui.settings import SERVED_ENV
from engine import CairnQ, SQLiteStore


def serve_args(*argv: str) -> object:
    args = build_parser().parse_args(["serve", *argv])
    named_targets.apply_to_args(args)
    return args


def test_the_tabs_console_is_read_only_and_hosts_nothing(tmp_path: Path) -> None:
    file = tmp_path / "config.toml"
    file.write_text(
        '[targets.local]\npath = "l.db"\nworkers = ["m:w"]\nmax_depth = { emails = 5 }\n',
        encoding="utf-8",
    )
    args = serve_args("--config", str(file), "local", "--worker", "x:y", "--queue", "emails")
    command = console_command(args, read_only=True)  # type: ignore[arg-type]
    assert command[2:5] == ["cairnq_tui.cli", "launch", "local"]
    assert command[5:7] == ["--config", str(file)]
    assert "--read-only" in command and "--worker" not in command
    assert command[command.index("--max-depth") + 1] == "emails=5"
    assert "--read-only" not in console_command(args, read_only=False)  # type: ignore[arg-type]


def test_a_served_console_ignores_the_targets_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    file = tmp_path / "config.toml"
    file.write_text('[targets.local]\npath = "l.db"\nworkers = ["m:w"]\n', encoding="utf-8")
    launch = ["launch", "--config", str(file), "local"]
    args = build_parser().parse_args(launch)
    named_targets.apply_to_args(args)
    assert args.workers == ["m:w"]
    monkeypatch.setenv(SERVED_ENV, "1")
    args = build_parser().parse_args(launch)
    named_targets.apply_to_args(args)
    assert args.workers is None


@pytest.mark.slow
async def test_a_worker_runs_once_in_the_server_not_in_each_tab(tmp_path: Path) -> None:
    db = tmp_path / "tasks.db"
    store = SQLiteStore(db)
    await store.connect()
    try:
        await served_worker_and_two_tabs(store, db, tmp_path)
    finally:
        await store.close()  # (an open store's thread would keep pytest from exiting)


async def served_worker_and_two_tabs(store: SQLiteStore, db: Path, tmp_path: Path) -> None:
    client = CairnQ(store)
    argv = [str(db), "--worker", "cairnq_tui.demo:make_worker"]
    with serving(argv, tmp_path / "serve.log") as (url, pid):
        ids = [(await client.submit("notify", {"n": i})).id for i in range(5)]
        until = time.monotonic() + 60
        while [(await client.get(i)).status for i in ids] != ["succeeded"] * 5:  # type: ignore[union-attr]
            assert time.monotonic() < until, "the server's hosted worker never ran the tasks"
            await asyncio.sleep(0.2)
        # Two browser tabs (websocket sessions): two consoles, neither hosting a worker.
        async with aiohttp.ClientSession() as session:
            socket_url = url.replace("http", "ws") + "ws?width=100&height=30"
            async with session.ws_connect(socket_url), session.ws_connect(socket_url):
                until = time.monotonic() + 60
                while len(consoles := tab_consoles(pid)) < 2:
                    assert time.monotonic() < until, f"tabs never started: {consoles}"
                    await asyncio.sleep(0.2)
        assert all("--read-only" in c and "--worker" not in c for c in consoles), consoles
