"""Who may talk to ``cairnq-tui serve``: the served address, from its own page.

A browser sends every request with a ``Host`` header (the name it resolved) and,
for a websocket or a script's request, an ``Origin`` (the page that asked).
Three checks keep the console to the operator's own tab:

* ``Host`` must name the served address. A foreign page that rebinds its own
  DNS name to 127.0.0.1 (DNS rebinding) reaches the port, but with its own
  name in ``Host``.
* ``Origin``, when sent, must be that same address. Any page open in the
  browser may open a websocket to 127.0.0.1, and the browser lets it; only the
  ``Origin`` it carries tells the server whose page asked.
* Past loopback, a token: the page is answered only at ``/?token=T`` and the
  socket only with the same token, so a machine on the network that can reach
  the port still needs the URL ``serve`` printed.

Clients that are not browsers send no ``Origin`` (and may send any): the token
is what keeps them out of a server reachable from the network.
"""

from __future__ import annotations

import hmac
import ipaddress
import re
import secrets
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

#: Names every machine gives its loopback interface.
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
#: What a token may hold (it travels in URLs).
_TOKEN = re.compile(r"[A-Za-z0-9_.~-]{16,256}")


class GateError(ValueError):
    """A ``serve`` option that cannot make a safe gate (bad token or address)."""


def is_loopback(host: str) -> bool:
    """True for a bind address reachable only from this machine."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def is_wildcard(host: str) -> bool:
    """True for ``0.0.0.0``/``::`` (every interface)."""
    try:
        return ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return False


def new_token() -> str:
    """A fresh token for a server reachable from the network."""
    return secrets.token_urlsafe(24)


def check_token(token: str) -> str:
    """``token`` if it can guard a server; else ``GateError`` (the token is never shown)."""
    if not _TOKEN.fullmatch(token):
        raise GateError("a --token is 16 to 256 characters among letters, digits and _ . ~ -")
    return token


def _address(netloc: str, default_port: int) -> tuple[str, int] | None:
    """``(host, port)`` of a ``Host`` header or an origin's netloc; None if malformed."""
    try:
        parts = urlsplit(f"//{netloc}")
        host, port = parts.hostname, parts.port
    except ValueError:
        return None
    if not host:
        return None
    return host.lower(), default_port if port is None else port


@dataclass(frozen=True, slots=True)
class Gate:
    """The addresses the server answers to, and its token (None: none required)."""

    addresses: frozenset[tuple[str, int]]
    token: str | None
    #: The port a ``Host`` without one means (80, or 443 behind an https public URL).
    default_port: int = 80

    @classmethod
    def for_server(cls, bind: str, port: int, *, public_url: str | None, token: str | None) -> Gate:
        """The gate of a server bound to ``bind:port`` and reached at ``public_url``."""
        names = {bind.strip("[]").lower()}
        if is_loopback(bind) or is_wildcard(bind):
            names.update(LOOPBACK_NAMES)
        if is_wildcard(bind):
            names.update(_machine_names())
        addresses = {(name, port) for name in names}
        default_port = 80
        if public_url:
            public = urlsplit(public_url)
            default_port = 443 if public.scheme in ("https", "wss") else 80
            if public.hostname:
                addresses.add((public.hostname.lower(), public.port or default_port))
        return cls(frozenset(addresses), token, default_port)

    def refusal(self, host: str | None, origin: str | None) -> str | None:
        """Why a request with these ``Host`` and ``Origin`` headers is refused (None: it is not)."""
        address = _address(host, self.default_port) if host else None
        if address is None or address not in self.addresses:
            return f"this server does not answer to the host name {host!r}"
        if origin is None:
            return None
        scheme, _, netloc = origin.partition("://")
        default = 443 if scheme.lower() == "https" else 80
        found = _address(netloc, default) if netloc else None
        if found is None or found not in self.addresses:
            return f"the page at {origin!r} is not this server's own page"
        return None

    def admits(self, token: str | None) -> bool:
        """True when ``token`` is the server's (or the server needs none)."""
        if self.token is None:
            return True
        return token is not None and hmac.compare_digest(token.encode(), self.token.encode())


def _machine_names() -> set[str]:
    """This machine's host names and addresses (for a server bound to every interface)."""
    names = {socket.gethostname().lower(), socket.getfqdn().lower()}
    try:
        for info in socket.getaddrinfo(socket.gethostname(), None):
            names.add(str(info[4][0]).lower())
    except OSError:
        pass  # an unresolvable host name: its name still counts
    return names
