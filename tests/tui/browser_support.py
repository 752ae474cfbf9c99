"""``cairnq-tui serve`` as a subprocess, and a headless Chromium driven over the
Chrome DevTools Protocol, for the serve tests.

No browser-automation dependency: Chromium's own ``--remote-debugging-port`` and
a websocket (aiohttp, which textual-serve already needs) are enough to load a
page, read the terminal's text, press keys and take a screenshot.

textual-serve draws the console with xterm.js on a canvas, so the page's DOM
holds no text. The terminal object is not global either; a script that runs
before the page's own catches it when textual-serve's client stores it
(``this.terminal = new Terminal(…)``), and the text is then read from xterm's
public buffer API (``terminal.buffer.active``).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import aiohttp

#: Runs before the page's scripts: keeps every xterm Terminal assigned to ``.terminal``.
CATCH_TERMINAL = """
(() => {
  window.__terminals = [];
  Object.defineProperty(Object.prototype, "terminal", {
    configurable: true,
    get() { return undefined; },
    set(value) {
      Object.defineProperty(this, "terminal", {
        value, writable: true, configurable: true, enumerable: true,
      });
      if (value && value.buffer) window.__terminals.push(value);
    },
  });
})();
"""

#: The terminal's visible lines, as text ("" until the terminal exists).
SCREEN_TEXT = """
(() => {
  const t = window.__terminals && window.__terminals[0];
  if (!t) return "";
  const buffer = t.buffer.active, lines = [];
  for (let row = 0; row < t.rows; row++) {
    const line = buffer.getLine(buffer.viewportY + row);
    lines.push(line ? line.translateToString(true) : "");
  }
  return lines.join("\\n");
})()
"""


SCRIPT = Path(sys.executable).with_name("cairnq-tui")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def serving(argv: Sequence[str], log_path: Path) -> Iterator[tuple[str, int]]:
    """``cairnq-tui serve ARGV --port P``: (the URL it printed once the page answers
    there, with 127.0.0.1 for its host; its pid)."""
    port = free_port()
    with log_path.open("wb") as log:
        server = subprocess.Popen(
            [SCRIPT, "serve", *argv, "--port", str(port)],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # the tabs' console processes end with the server
        )
        try:
            until = time.monotonic() + 60
            while not (printed := re.search(r"the console is at (\S+)", log_path.read_text())):
                assert server.poll() is None, log_path.read_text()
                assert time.monotonic() < until, "serve never printed its URL"
                time.sleep(0.1)
            url = re.sub(r"^http://[^/]+/", f"http://127.0.0.1:{port}/", printed.group(1))
            while True:
                assert server.poll() is None, log_path.read_text()
                try:
                    with urllib.request.urlopen(url, timeout=5) as answer:
                        assert b"ws://127.0.0.1" in answer.read()
                    break
                except OSError:
                    assert time.monotonic() < until, "serve never answered"
                    time.sleep(0.2)
            yield url, server.pid
        finally:
            _end_group(server)


def _end_group(process: subprocess.Popen[bytes]) -> None:
    """End a process this test started, and the group it leads."""
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def descendants(pid: int) -> list[str]:
    """The command lines of every process below ``pid``."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            parents.setdefault(parent, []).append(int(entry))
    found, todo = [], list(parents.get(pid, []))
    while todo:
        child = todo.pop()
        todo += parents.get(child, [])
        try:
            found.append(Path(f"/proc/{child}/cmdline").read_text().replace("\0", " "))
        except OSError:
            continue
    return found


def tab_consoles(server_pid: int) -> list[str]:
    """The console processes the server started for tabs (not their /bin/sh wrappers)."""
    return [
        c
        for c in descendants(server_pid)
        if c.startswith(sys.executable) and " cairnq_tui.cli launch " in c
    ]


def chromium_path() -> str | None:
    """Debian's ``chromium`` (or another Chromium/Chrome on PATH)."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


class Page:
    """One browser tab over CDP: calls wait for their own answer, events are dropped."""

    def __init__(self, socket: aiohttp.ClientWebSocketResponse) -> None:
        self.socket = socket
        self.last_id = 0

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.last_id += 1
        call_id = self.last_id
        await self.socket.send_json({"id": call_id, "method": method, "params": params})
        async for message in self.socket:
            data = json.loads(message.data)
            if data.get("id") != call_id:
                continue  # an event, or the answer to nothing we wait for
            if "error" in data:
                raise RuntimeError(f"{method}: {data['error']}")
            result: dict[str, Any] = data["result"]
            return result
        raise RuntimeError(f"{method}: the browser closed the connection")

    async def evaluate(self, expression: str) -> Any:
        answer = await self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return answer["result"].get("value")

    async def screen_text(self) -> str:
        return str(await self.evaluate(SCREEN_TEXT) or "")

    async def wait_for_text(self, *wanted: str, gone: str = "", deadline_s: float = 90.0) -> str:
        """The screen once it shows every ``wanted`` text (and not ``gone``)."""
        until = time.monotonic() + deadline_s
        text = ""
        while time.monotonic() < until:
            text = await self.screen_text()
            if all(w in text for w in wanted) and not (gone and gone in text):
                return text
            await asyncio.sleep(0.2)
        raise AssertionError(f"never showed {wanted} (without {gone!r}); last screen:\n{text}")

    async def press(self, key: str) -> None:
        """Type one printable character into the focused terminal."""
        await self.evaluate("window.__terminals[0].focus()")
        code = f"Digit{key}" if key.isdigit() else f"Key{key.upper()}"
        event = {"key": key, "code": code, "windowsVirtualKeyCode": ord(key.upper())}
        await self.call("Input.dispatchKeyEvent", type="keyDown", text=key, **event)
        await self.call("Input.dispatchKeyEvent", type="keyUp", **event)

    async def screenshot(self, path: Path) -> Path:
        shot = await self.call("Page.captureScreenshot", format="png")
        path.write_bytes(base64.b64decode(shot["data"]))
        return path


@asynccontextmanager
async def headless_page(
    browser: str, profile: Path, url: str, *, size: tuple[int, int] = (1400, 900)
) -> AsyncIterator[Page]:
    """A Chromium started for this test, one tab on ``url``; the browser ends after."""
    process = subprocess.Popen(
        [
            browser,
            "--headless=new",
            "--no-sandbox",  # CI runs as root, where Chromium's sandbox refuses to start
            "--no-first-run",
            "--remote-debugging-port=0",
            f"--user-data-dir={profile}",
            f"--window-size={size[0]},{size[1]}",
            "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own process group: its helpers end with it
    )
    try:
        port = await _debugging_port(profile / "DevToolsActivePort", process)
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{port}/json/list") as answer:
                tabs = await answer.json()
            tab = next(t for t in tabs if t["type"] == "page")
            async with session.ws_connect(tab["webSocketDebuggerUrl"], max_msg_size=0) as ws:
                page = Page(ws)
                await page.call("Page.enable")
                await page.call("Page.addScriptToEvaluateOnNewDocument", source=CATCH_TERMINAL)
                await page.call("Page.navigate", url=url)
                yield page
    finally:
        _end_group(process)


async def _debugging_port(file: Path, process: subprocess.Popen[bytes]) -> int:
    until = time.monotonic() + 60
    while time.monotonic() < until:
        if process.poll() is not None:
            raise RuntimeError(f"chromium exited with status {process.returncode}")
        if file.exists() and file.read_text().strip():
            return int(file.read_text().splitlines()[0])
        await asyncio.sleep(0.1)
    raise RuntimeError("chromium never opened its debugging port")
