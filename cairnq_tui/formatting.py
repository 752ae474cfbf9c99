"""How values look on screen: ages, countdowns, bars, status colours, safe text.

Everything read from the database is shown through ``safe_text``: a task's name,
message or payload may hold terminal escapes or Rich markup (``[bold]``), and the
console must show those characters, never interpret them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from rich.cells import cell_len, set_cell_size
from rich.text import Text

STATUS_STYLES = {
    "queued": "cyan",
    "running": "bold yellow",
    "succeeded": "green",
    "failed": "bold red",
    "canceled": "magenta",
}
SPARK_BARS = "▁▂▃▄▅▆▇█"


#: Printable by Python's rules yet invisible or zero-width on a terminal: the
#: Hangul fillers, the combining grapheme joiner, Khmer and Mongolian invisibles,
#: and the variation selectors (they change an emoji's width on some terminals).
_INVISIBLE = re.compile(
    "[\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u3164\uffa0\ufe00-\ufe0f\U000e0100-\U000e01ef]"
)


def escape_char(char: str) -> str:
    """One character as the console shows it: itself, or an escape if it is invisible.

    Controls (C0, C1, DEL), format characters (zero-width spaces and joiners, BOM,
    bidi overrides and isolates, tags), separators other than the space, private
    use, unassigned code points and the invisibles of ``_INVISIBLE`` are shown as
    ``\\x1b``, ``\\u200b`` or ``\\U000e0041``: what is there is always what is seen.
    """
    if char == " " or (char.isprintable() and not _INVISIBLE.match(char)):
        return char
    code = ord(char)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def clean(value: object) -> str:
    """``value`` as a one-line string, every invisible character shown as an escape.

    The one escaping function of the console: table cells, the JSON tree, the
    detail screen, keys, notifications and errors all go through it. A line
    break shows as ``⏎``.
    """
    text = "" if value is None else str(value)
    if text.isprintable() and not _INVISIBLE.search(text):
        return text
    return "".join(escape_char(c) for c in text.replace("\n", "⏎"))


def quoted(value: object) -> str:
    """``clean(value)`` in single quotes, for names and keys inside a sentence."""
    return f"'{clean(value)}'"


def short_id(value: str, *, head: int = 7, tail: int = 6) -> str:
    """A long id as its start and its end (``worker_…K3F9QZ``): both are what people
    match by eye; the detail screen shows it in full."""
    if len(value) <= head + tail + 1:
        return value
    return f"{value[:head]}…{value[-tail:]}"


def safe_text(value: object, style: str = "", *, limit: int | None = None) -> Text:
    """Literal text for a cell: never parsed as markup, control characters shown."""
    text = clean(value)
    if limit is not None and cell_len(text) > limit:
        text = set_cell_size(text, limit - 1).rstrip() + "…"
    return Text(text, style=style, no_wrap=True, overflow="ellipsis")


def status_text(status: str | None) -> Text:
    """A status in its colour (an unknown one is shown literally, unstyled)."""
    if status is None:
        return Text("—", style="dim")
    return safe_text(status, STATUS_STYLES.get(status, ""))


def duration(ms: int) -> str:
    """A compact duration: ``850ms``, ``12.3s``, ``4m05s``, ``3h12m``, ``2d04h``."""
    ms = abs(ms)
    if ms < 1_000:
        return f"{ms}ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f}s"
    s = ms // 1000
    if s < 3_600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86_400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def age(then_ms: int | None, now_ms: int) -> str:
    """How long ago ``then_ms`` was (``—`` for none)."""
    if then_ms is None:
        return "—"
    return duration(now_ms - then_ms) if now_ms >= then_ms else "in " + duration(then_ms - now_ms)


def due_in(run_at_ms: int, now_ms: int) -> Text:
    """``due`` when the time has come, else the wait left."""
    if run_at_ms <= now_ms:
        return Text("due", style="dim")
    return Text("in " + duration(run_at_ms - now_ms), style="cyan")


def lease_left(lease_until_ms: int | None, now_ms: int) -> Text:
    """A lease countdown; an expired lease is flagged as awaiting recovery."""
    if lease_until_ms is None:
        return Text("—", style="dim")
    left = lease_until_ms - now_ms
    if left > 0:
        return Text(duration(left), style="yellow" if left < 5_000 else "")
    return Text(f"expired {duration(-left)} ago — awaiting recovery", style="bold red")


def progress_bar(progress: float | None, width: int = 10) -> Text:
    """A text progress bar with its percentage."""
    if progress is None:
        return Text("—", style="dim")
    value = min(max(float(progress), 0.0), 1.0)
    filled = round(value * width)
    return Text.assemble(
        ("█" * filled, "green"), ("░" * (width - filled), "dim"), f" {value * 100:3.0f}%"
    )


def sparkline(values: Sequence[int]) -> Text:
    """One bar per value, scaled to the largest (all-zero stays flat)."""
    top = max(values, default=0)
    if top <= 0:
        return Text(SPARK_BARS[0] * len(values), style="dim")
    bars = "".join(SPARK_BARS[min(7, round(v / top * 7))] for v in values)
    return Text(bars, style="green")
