"""The recorder rows of bench/console_bench.py run on tiny sizes (no timings checked)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def test_simulated_hours_fill_the_history_file() -> None:
    sys.path.insert(0, str(BENCH))
    try:
        import recorder_rows
    finally:
        sys.path.remove(str(BENCH))
    week = asyncio.run(recorder_rows.simulate_week(days=1 / 24, failures=7 * 24 * 60))
    # An hour of samples every 10 s, and every failure that arrived (60 an hour) kept.
    assert week["samples"] == 360
    assert week["failures_inserted"] == 60
    assert week["failures_in_file"] == 60
    assert week["sample_rows"] == 360  # a row per sample (what changed)
    assert week["size_mb"] > 0
