"""What the console runs with: the ``Settings`` that ``cairnq-tui launch`` (or a
switch of target) asked for.

(What a TARGET is and how it is opened: ``target``; the config file that names
targets: ``named_targets``.)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cairnq_tui.target import Target

#: Set by ``serve`` for the consoles it starts: they never host workers and stay
#: on their target.
SERVED_ENV = "CAIRNQ_TUI_SERVED"


@dataclass(frozen=True)
class Settings:
    """What ``cairnq-tui launch`` was asked for."""

    target: Target
    read_only: bool = False
    queues: tuple[str, ...] = ()
    refresh_s: float = 1.0
    theme: str | None = None
    notice: str | None = None
    max_depth: dict[str, int] = field(default_factory=dict)
    #: Counts that may cost up to the cap run every this many ticks.
    slow_every: int = 5
    #: The config's name for the target (None for a literal path or DSN).
    name: str | None = None
    #: A ``danger = true`` target: warning colours, every write asks for its name.
    danger: bool = False
    #: ``--config`` (None: the default location); ``:`` lists its targets.
    config_path: str | None = None
    #: ``--read-only`` was given: every target switched to stays read-only.
    locked_read_only: bool = False
