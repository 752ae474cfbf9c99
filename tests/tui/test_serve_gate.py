"""``cairnq-tui serve`` answers only its own page: a real served process, probed with
real HTTP and websocket clients beside a legit tab.

Another site's page (a foreign ``Origin``), a rebound DNS name (a foreign
``Host``) or a missing token are answered 403 and start no console; past
``--max-sessions`` the page and the socket say so (503); and the page loads
nothing from another host.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import aiohttp
import pytest
from browser_support import SCRIPT, serving, tab_consoles
from console_states import build_demo_db

from cairnq_tui.web import Gate

pytestmark = pytest.mark.slow

#: A task name the demo database holds: a tab that reads the screen sees it.
ON_SCREEN = "charge_card"


def socket_url(url: str, token: str | None = None) -> str:
    base = re.sub(r"^http", "ws", url.split("?")[0]).rstrip("/")
    return f"{base}/ws{'/' + token if token else ''}?width=120&height=30"


def origin_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


async def read_screen(socket: aiohttp.ClientWebSocketResponse, wanted: str) -> str:
    """What the console sent until ``wanted`` shows (generous deadline)."""
    seen = ""
    async with asyncio.timeout(90):
        async for message in socket:
            data = message.data
            seen += data.decode(errors="replace") if isinstance(data, bytes) else str(data)
            if wanted in seen:
                return seen
    raise AssertionError(f"the session closed before showing {wanted!r}")


async def refused_socket(
    session: aiohttp.ClientSession, url: str, headers: dict[str, str] | None = None
) -> int:
    """The status a websocket handshake was refused with."""
    with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
        await session.ws_connect(url, headers=headers or {})
    return refused.value.status


async def wait_for_consoles(pid: int, count: int) -> list[str]:
    until = time.monotonic() + 60
    while len(found := tab_consoles(pid)) != count:
        assert time.monotonic() < until, f"wanted {count} consoles, found {found}"
        await asyncio.sleep(0.2)
    return found


@asynccontextmanager
async def client() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def test_foreign_pages_and_host_names_are_refused_beside_a_legit_tab(
    tmp_path: Path,
) -> None:
    db = build_demo_db(tmp_path / "demo.db")
    with serving([str(db), "--allow-writes"], tmp_path / "serve.log") as (url, pid):
        port = urlsplit(url).port
        socket, own = socket_url(url), origin_of(url)
        async with client() as session, session.ws_connect(socket, origin=own) as legit:
            await read_screen(legit, ON_SCREEN)
            foreign = [
                {"Origin": "http://evil.example"},
                {"Origin": f"http://evil.example:{port}"},
                {"Origin": "null"},
                {"Origin": f"http://127.0.0.1:{port + 1 if port < 65535 else 1}"},
                {"Host": f"evil.example:{port}"},
                {"Host": f"127.0.0.1.evil.example:{port}", "Origin": own},
            ]
            for headers in foreign:
                assert await refused_socket(session, socket, headers) == 403, headers
                async with session.get(url, headers=headers) as page:
                    assert page.status == 403, headers
                    assert "refused" in await page.text()
            # Nothing started for them: the legit tab's console is the only one.
            assert len(tab_consoles(pid)) == 1
            # The page from its own address (and localhost) is served.
            for host in (f"127.0.0.1:{port}", f"localhost:{port}"):
                async with session.get(url, headers={"Host": host}) as page:
                    assert page.status == 200
                    assert f'"ws://{host}/ws"' in await page.text()
        log = (tmp_path / "serve.log").read_text()
        assert "evil.example" in log and "Traceback" not in log


async def test_sessions_past_the_cap_are_refused_with_a_message(tmp_path: Path) -> None:
    db = build_demo_db(tmp_path / "demo.db")
    argv = [str(db), "--max-sessions", "2"]
    with serving(argv, tmp_path / "serve.log") as (url, pid):
        socket, own = socket_url(url), origin_of(url)
        async with client() as session:
            first = await session.ws_connect(socket, origin=own)
            async with session.ws_connect(socket, origin=own) as second:
                await wait_for_consoles(pid, 2)
                for _ in range(3):  # a third, fourth, fifth tab: each refused
                    assert await refused_socket(session, socket, {"Origin": own}) == 503
                async with session.get(url) as page:
                    assert page.status == 503
                    assert "--max-sessions 2" in await page.text()
                assert len(tab_consoles(pid)) == 2
                await first.close()
                # The closed tab's place is free again (once its console ended).
                until = time.monotonic() + 60
                while True:
                    try:
                        third = await session.ws_connect(socket, origin=own)
                        break
                    except aiohttp.WSServerHandshakeError as exc:
                        assert exc.status == 503
                        assert time.monotonic() < until, "the closed session never ended"
                        await asyncio.sleep(0.2)
                async with third:
                    await read_screen(third, ON_SCREEN)
                await read_screen(second, "")  # the first tab's neighbour still answers


def test_the_default_cap_is_four() -> None:
    out = subprocess.run([SCRIPT, "serve", "--help"], capture_output=True, text=True).stdout
    assert re.search(r"--max-sessions N\s+browser tabs .*\(default 4\)", " ".join(out.split()))


async def test_beyond_loopback_the_page_and_socket_need_the_printed_token(
    tmp_path: Path,
) -> None:
    db = build_demo_db(tmp_path / "demo.db")
    argv = [str(db), "--host", "0.0.0.0"]
    with serving(argv, tmp_path / "serve.log") as (url, pid):
        token = parse_qs(urlsplit(url).query)["token"][0]
        assert len(token) >= 16
        bare = url.split("?")[0]
        own = origin_of(url)
        async with client() as session:
            for page_url in (bare, f"{bare}?token=wrong-token-0123456789"):
                async with session.get(page_url) as page:
                    assert page.status == 403
                    assert token not in await page.text()
            for wrong in (None, "wrong-token-0123456789"):
                assert await refused_socket(session, socket_url(url, wrong), {"Origin": own})
            async with session.get(url) as page:
                assert page.status == 200
                assert f"/ws/{token}" in await page.text()
            # A foreign page is refused even with the token.
            assert await refused_socket(
                session, socket_url(url, token), {"Origin": "http://evil.example"}
            )
            assert tab_consoles(pid) == []
            async with session.ws_connect(socket_url(url, token), origin=own) as legit:
                await read_screen(legit, ON_SCREEN)


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--token", "short"], "a --token is 16 to 256 characters"),
        (["--token", "x" * 20 + " y"], "a --token is 16 to 256 characters"),
        (["--max-sessions", "0"], "--max-sessions is between 1 and 1000"),
        (["--max-sessions", "many"], "not a number of sessions"),
    ],
)
def test_bad_serve_options_are_one_line_and_create_nothing(
    tmp_path: Path, argv: list[str], said: str
) -> None:
    db = tmp_path / "new.db"
    done = subprocess.run(
        [SCRIPT, "serve", str(db), *argv], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert said in done.stderr and "Traceback" not in done.stderr
    assert "x" * 20 not in done.stderr  # a token is never echoed
    assert not db.exists()


async def test_the_page_loads_nothing_from_another_host(tmp_path: Path) -> None:
    db = build_demo_db(tmp_path / "demo.db")
    with serving([str(db)], tmp_path / "serve.log") as (url, _):
        async with client() as session:
            async with session.get(url) as page:
                html = await page.text()
                policy = page.headers["Content-Security-Policy"]
            assert "default-src 'self'" in policy and "frame-ancestors 'none'" in policy
            loads = re.findall(r'(?:src|href)="([^"]*)"|url\("?([^")]*)"?\)', html)
            found = [a or b for a, b in loads]
            assert "static/js/textual.js" in found
            assert any("RobotoMono" in f for f in found)  # the font, served here
            for address in found:  # relative: the page's own server (or proxy prefix)
                assert address.startswith("static/"), address
                async with session.get(url.split("?")[0] + address) as answer:
                    assert answer.status == 200, address
            async with session.get(url.rstrip("/") + "/static/css/xterm.css") as css:
                assert not re.search(r"url\(|@import", await css.text())


@pytest.mark.parametrize(
    ("host", "origin", "answered"),
    [
        ("127.0.0.1:8000", None, True),
        ("localhost:8000", "http://localhost:8000", True),
        ("[::1]:8000", "http://127.0.0.1:8000", True),
        ("LOCALHOST:8000", None, True),
        ("127.0.0.1:8001", None, False),
        ("127.0.0.1", None, False),  # port 80
        ("evil.example:8000", None, False),
        ("127.0.0.1:8000", "http://evil.example:8000", False),
        ("127.0.0.1:8000", "null", False),
        ("127.0.0.1:8000", "http://127.0.0.1:8000.evil.example", False),
        ("127.0.0.1:nope", None, False),
        (None, None, False),
    ],
)
def test_the_gate_on_loopback(host: str | None, origin: str | None, answered: bool) -> None:
    gate = Gate.for_server("127.0.0.1", 8000, public_url="http://127.0.0.1:8000/", token=None)
    assert (gate.refusal(host, origin) is None) is answered


def test_a_public_url_names_the_host_a_proxy_sends() -> None:
    gate = Gate.for_server(
        "127.0.0.1", 8000, public_url="https://console.example.org/", token="t" * 20
    )
    assert gate.refusal("console.example.org", "https://console.example.org") is None
    assert gate.refusal("console.example.org:80", None) is not None
    assert gate.admits("t" * 20) and not gate.admits(None) and not gate.admits("t" * 19)


async def test_behind_a_proxy_the_page_points_its_socket_at_the_public_url() -> None:
    """The page answers to the ``--public-url`` host and sends the socket there
    (an in-process server: no console starts for a page)."""
    from aiohttp.test_utils import TestClient, TestServer

    from cairnq_tui.web import WebConsole

    public = "https://console.example.org/ops/"
    gate = Gate.for_server("127.0.0.1", 8000, public_url=public, token="t" * 20)
    web = WebConsole(
        None, host="127.0.0.1", port=8000, gate=gate, url=public, title="t", public_url=public
    )
    async with TestClient(TestServer(web.make_app())) as http:
        headers = {"Host": "console.example.org", "Origin": "https://console.example.org"}
        page = await http.get("/?token=" + "t" * 20, headers=headers)
        assert page.status == 200
        assert 'data-session-websocket-url="wss://console.example.org/ops/ws/' in await page.text()
        refused = await http.get("/?token=" + "t" * 20, headers={"Host": "evil.example"})
        assert refused.status == 403
