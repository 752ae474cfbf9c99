"""``cairnq-tui serve`` end to end: the real command serves the console, a headless
Chromium opens the page, the task names of the database appear, a key switches the
view, and a screenshot is saved.

Needs Debian's chromium (``.ci/run`` installs it). Without it the test skips, and
with ``CAIRNQ_REQUIRE_BROWSER=1`` (what CI sets) that skip is a failure.
Set ``CAIRNQ_WRITE_SCREENSHOTS=1`` to also write the README's screenshots/browser.png.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser_support import chromium_path, headless_page, serving
from console_states import build_demo_db

pytestmark = [pytest.mark.browser, pytest.mark.slow]

README_SHOT = Path(__file__).resolve().parents[2] / "screenshots" / "browser.png"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    """``cairnq-tui serve demo`` (a named target: the demo database); its URL once up."""
    db = build_demo_db(tmp_path / "demo.db")
    config = tmp_path / "config.toml"
    config.write_text(f'[targets.demo]\npath = "{db}"\nrefresh = 2\n', encoding="utf-8")
    with serving(["--config", str(config), "demo"], tmp_path / "serve.log") as (url, _):
        yield url


async def test_the_console_in_a_browser(served: str, tmp_path: Path) -> None:
    browser = chromium_path()
    if browser is None:
        pytest.skip("browser: no chromium on PATH (apt-get install chromium)")
    async with headless_page(browser, tmp_path / "profile", served) as page:
        # The Tasks view: names from the database, and the served console is read-only.
        text = await page.wait_for_text("charge_card", "send_welcome", "READ-ONLY", "shown of")
        assert "Tasks [1]" in text
        assert re.search(r"READ-ONLY\s+demo\s+/\S+/demo\.db\s+sqlite", text), text
        assert "every 2s" in text  # the target's refresh from the config
        # Everything the page loaded came from the server, the font included.
        loaded = await page.evaluate(
            "JSON.stringify(performance.getEntriesByType('resource').map(e => e.name))"
        )
        served_at = served.split("?")[0].rstrip("/")
        assert all(name.startswith(served_at) for name in json.loads(loaded)), loaded
        fonts = await page.evaluate(
            "JSON.stringify([...document.fonts].map(f => [f.family, f.status]))"
        )
        assert ["Roboto Mono", "loaded"] in json.loads(fonts), fonts
        await page.press("2")
        text = await page.wait_for_text("Oldest due", "billing", gone="shown of")
        assert "charge_card" not in text  # the task rows are gone: the Queues view shows
        shot = await page.screenshot(tmp_path / "browser.png")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
    if os.environ.get("CAIRNQ_WRITE_SCREENSHOTS") == "1":
        README_SHOT.write_bytes(shot.read_bytes())
