"""The HTTP server of ``cairnq-tui serve``: our page, textual-serve's sessions, one gate.

textual-serve's ``Server.handle_websocket`` starts one console process per
websocket and relays it; everything around it is built here, on aiohttp's public
API, so that no request reaches it unchecked:

* every request passes the ``Gate`` (``Host``, ``Origin``; the token on the page
  and the socket) or is answered 403 before anything starts;
* at most ``max_sessions`` sockets are live at once; past that the page and the
  socket are answered 503 with a message saying so;
* the page is our own template (``page.html``): it loads its script, styles and
  fonts from this server only, and forbids anything else with a
  Content-Security-Policy (textual-serve's own page pulls a font from Google).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from importlib.resources import files
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import aiohttp_jinja2
import jinja2
from aiohttp import web

from cairnq_tui.web._gate import Gate

log = logging.getLogger("cairnq_tui.serve")

DEFAULT_MAX_SESSIONS = 4
_PAGE_FOLDER = Path(__file__).with_name("templates")
#: The page may load from its own server only, and never be framed by another page.
_POLICY = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self'; connect-src 'self'; frame-ancestors 'none'; "
    "base-uri 'none'; form-action 'none'"
)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _static_folder() -> Path:
    """textual-serve's static files (its terminal script, styles and fonts)."""
    return Path(str(files("textual_serve") / "static"))


class WebConsole:
    """``cairnq-tui serve``'s server: ``run()`` serves until SIGINT/SIGTERM.

    ``sessions`` is the textual-serve ``Server`` that starts a console per socket.
    """

    return_code = 0

    def __init__(
        self,
        sessions: Any,
        *,
        host: str,
        port: int,
        gate: Gate,
        url: str,
        title: str,
        max_sessions: int = DEFAULT_MAX_SESSIONS,
        public_url: str | None = None,
    ) -> None:
        self.sessions = sessions
        self.host = host
        self.port = port
        self.gate = gate
        self.url = url
        self.title = title
        self.max_sessions = max_sessions
        #: ``--public-url``: where browsers reach the server (its socket too).
        self.public_url = public_url
        self.live = 0

    def make_app(self) -> web.Application:
        app = web.Application(middlewares=[self._guard])
        aiohttp_jinja2.setup(app, loader=jinja2.FileSystemLoader(_PAGE_FOLDER), autoescape=True)
        app.add_routes(
            [
                web.get("/", self.page),
                web.get("/ws", self.socket),
                web.get("/ws/{token}", self.socket),
                web.static("/static", _static_folder()),
            ]
        )
        return app

    def run(self) -> None:
        print(f"cairnq-tui serve: the console is at {self.url}", flush=True)
        print(
            f"(at most {self.max_sessions} browser tabs at once; Ctrl+C stops the server)",
            flush=True,
        )
        logging.basicConfig(level=logging.INFO, format="cairnq-tui serve: %(message)s")
        web.run_app(
            self.make_app(),
            host=self.host,
            port=self.port,
            print=None,
            access_log=None,  # the request lines would show the token
        )

    @web.middleware
    async def _guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        why = self.gate.refusal(request.headers.get("Host"), request.headers.get("Origin"))
        if why is None and request.path != "/" and not request.path.startswith("/ws"):
            response = await handler(request)  # textual-serve's static files
            response.headers.setdefault("X-Content-Type-Options", "nosniff")
            return response
        if why is None:
            token = request.match_info.get("token") or request.query.get("token")
            if not self.gate.admits(token):
                why = "this server needs its token: open the URL cairnq-tui serve printed"
        if why is not None:
            log.warning("refused %s %s: %s", request.method, request.path, why)
            raise web.HTTPForbidden(text=f"cairnq-tui serve refused this request: {why}\n")
        return await handler(request)

    def _full(self) -> str | None:
        if self.live < self.max_sessions:
            return None
        return (
            f"all {self.max_sessions} console sessions of this server are in use "
            f"(--max-sessions {self.max_sessions}): close a tab, or restart serve "
            "with a higher --max-sessions"
        )

    async def page(self, request: web.Request) -> web.StreamResponse:
        full = self._full()
        if full is not None:
            log.warning("refused a page: %s", full)
            raise web.HTTPServiceUnavailable(text=f"cairnq-tui serve: {full}\n")
        socket_url = f"ws://{request.host}/ws"  # the host the gate just accepted
        if self.public_url:
            public = urlsplit(self.public_url)
            scheme = "wss" if public.scheme == "https" else "ws"
            socket_url = f"{scheme}://{public.netloc}{public.path.rstrip('/')}/ws"
        if self.gate.token is not None:
            socket_url += "/" + quote(self.gate.token, safe="")
        context = {"title": self.title, "socket_url": socket_url, "font_size": _font_size(request)}
        response = aiohttp_jinja2.render_template("page.html", request, context)
        response.headers["Content-Security-Policy"] = _POLICY
        response.headers["X-Frame-Options"] = "DENY"
        response.headers["Referrer-Policy"] = "no-referrer"  # the URL holds the token
        response.headers["Cache-Control"] = "no-store"
        return response

    async def socket(self, request: web.Request) -> web.StreamResponse:
        full = self._full()
        if full is not None:
            log.warning("refused a session: %s", full)
            raise web.HTTPServiceUnavailable(text=f"cairnq-tui serve: {full}\n")
        self.live += 1  # (no await since the check: no other session got in between)
        try:
            response: web.StreamResponse = await self.sessions.handle_websocket(request)
            return response
        finally:
            self.live -= 1


def _font_size(request: web.Request) -> int:
    try:
        size = int(request.query.get("fontsize", "16"))
    except ValueError:
        return 16
    return min(max(size, 6), 64)
