"""Running a console (or ``serve``'s server) with its hosted workers around it."""

from __future__ import annotations

import sys
from typing import Protocol

from cairnq_tui.exits import EXIT_BAD_TARGET
from cairnq_tui.hosting._host import WorkerHost
from cairnq_tui.hosting._load import HostError


class Runnable(Protocol):
    """What runs while the workers are hosted: the console app, or ``serve``'s server."""

    def run(self) -> object: ...

    @property
    def return_code(self) -> int | None: ...


def start_hosting(host: WorkerHost | None) -> bool:
    """Start the hosted workers; False (and one line on stderr) when one cannot start."""
    if host is not None:
        try:
            host.start()
        except HostError as exc:
            print(f"cairnq-tui: {exc}", file=sys.stderr)
            return False
    return True


def run_hosting(app: Runnable, host: WorkerHost | None, *, started: bool = False) -> int:
    """Start the hosted workers (unless ``started``), run the console (or server), then
    shut them down."""
    if not started and not start_hosting(host):
        return EXIT_BAD_TARGET
    try:
        app.run()
    finally:
        if host is not None:
            host.shutdown()
            left = host.left_running_line()
            if left is not None:
                print(left, file=sys.stderr)
    return app.return_code or 0
