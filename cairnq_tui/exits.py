"""How a ``cairnq-tui`` command refuses: one line on stderr, then exit status 2."""

from __future__ import annotations

import sys

#: The exit status of a refused command (a bad target or bad flags).
EXIT_BAD_TARGET = 2


def refused(message: str) -> int:
    """Say ``message`` as the one ``cairnq-tui:`` line on stderr; the status to exit with."""
    print(f"cairnq-tui: {message}", file=sys.stderr)
    return EXIT_BAD_TARGET
