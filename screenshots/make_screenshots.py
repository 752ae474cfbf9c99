"""Draw the console's screenshots (SVG) from the states the snapshot tests use.

Each picture is the app on the deterministic demo database
(``tests/tui/console_states.py``), frozen clock and all, after the same key
presses as ``tests/tui/test_snapshots.py``. Run from the repository root:

    python screenshots/make_screenshots.py
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "tui")]

from console_states import SNAPSHOT_SIZE, VIEWS, build_demo_db, demo_app, press  # noqa: E402
from hosted_states import HOSTED_VIEWS, hosted_app  # noqa: E402
from triage_states import build_triage_db  # noqa: E402

#: The triage views, on the triage database (tests/tui/triage_states.py).
PANELS = {"failures": "Failures", "metrics": "Metrics"}


async def shoot_panel(name: str, panel: str) -> Path:
    from console_states import settle

    from cairnq_tui.panels import open_panel

    with tempfile.TemporaryDirectory() as tmp:
        db = build_triage_db(Path(tmp) / "demo.db")
        app = demo_app(db, history=False)
        async with app.run_test(size=SNAPSHOT_SIZE) as pilot:
            await settle(pilot)
            open_panel(app, panel)
            await settle(pilot)
            out = HERE / f"{name}.svg"
            out.write_text(app.export_screenshot(title=f"cairnq console: {name}"), encoding="utf-8")
    return out


async def shoot(
    name: str, keys: tuple[str, ...], *, read_only: bool = False, hosted: bool = False
) -> Path:
    with tempfile.TemporaryDirectory() as tmp:
        db = build_demo_db(Path(tmp) / "demo.db")
        # The hosted views show a still demo worker (tests/tui/hosted_states.py).
        app = hosted_app(db) if hosted else demo_app(db, read_only=read_only)
        async with app.run_test(size=SNAPSHOT_SIZE) as pilot:
            await press(*keys)(pilot)
            out = HERE / f"{name}.svg"
            out.write_text(app.export_screenshot(title=f"cairnq console: {name}"), encoding="utf-8")
    return out


async def main() -> None:
    # The consoles pictured keep their history files in a throwaway folder.
    os.environ["XDG_STATE_HOME"] = tempfile.mkdtemp(prefix="cairnq-shots-")
    for name, keys in VIEWS.items():
        print(await shoot(name, keys))
    print(await shoot("read-only", (), read_only=True))
    for name, keys in HOSTED_VIEWS.items():
        print(await shoot(name, keys, hosted=True))
    for name, panel in PANELS.items():
        print(await shoot_panel(name, panel))


if __name__ == "__main__":
    asyncio.run(main())
