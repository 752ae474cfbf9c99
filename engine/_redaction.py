"""Passwords out of anything shown: one redactor for the engine and the console.

A DSN reaches messages, titles and logs both on its own (a store's ``target``)
and inside other text (a driver's error quoting the URL it could not reach),
so ``redact_dsn`` takes any text and replaces every password it finds with
``***``: in a URL's user info, in a URL's ``password=`` query parameter, and in
a key/value DSN's ``password=`` (quoted or not).

A URL's user info ends at its *last* ``@`` before the query: a password may
itself contain ``@`` (``postgresql://u:p@ss@h/db``), and cutting at the first
one would show the rest of it. Redacting too much is harmless; too little is not.

A driver cuts such a URL at its *first* ``@`` instead, and then quotes the rest as
the host it could not resolve (``failed to resolve host 'ss@word@h'``): that text
holds no URL left to find. Given the DSN the text is about (``source``),
``redact_dsn`` also removes its password wherever it appears whole, and the part
after its first ``@`` where it is quoted as the start of a host (``ss@word@``).
"""

from __future__ import annotations

import re
from urllib.parse import unquote

_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s\"'<>]*")
#: A ``password=`` value: quoted, already redacted (``***`` then a quote, space,
#: ``:``, ``)`` or the end: text redacted twice keeps what follows), or bare.
_PASSWORD_PARAM = re.compile(
    r"(?i)(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|\*\*\*(?=[\s'\":),]|$)|[^\s&]+)"
)


def _redact_url(match: re.Match[str]) -> str:
    scheme, rest = match.group(0).split("://", 1)
    ends = [i for i in (rest.find("?"), rest.find("#")) if i >= 0]
    at = rest.rfind("@", 0, min(ends, default=len(rest)))
    if at >= 0 and ":" in rest[:at]:
        user = rest[:at].split(":", 1)[0]
        rest = f"{user}:***{rest[at:]}"
    return f"{scheme}://{rest}"


def _passwords(dsn: str) -> list[str]:
    """The password(s) ``dsn`` holds, as written and percent-decoded."""
    found = [m.group(2) for m in _PASSWORD_PARAM.finditer(dsn)]
    found += [p[1:-1] for p in found if len(p) > 1 and p[0] == p[-1] == "'"]
    url = _URL.match(dsn.strip())
    if url:
        rest = url.group(0).split("://", 1)[1]
        ends = [i for i in (rest.find("?"), rest.find("#")) if i >= 0]
        at = rest.rfind("@", 0, min(ends, default=len(rest)))
        if at >= 0 and ":" in rest[:at]:
            found.append(rest[:at].split(":", 1)[1])
    return found + [unquote(p) for p in found]


def redact_dsn(text: str, *, source: str | None = None) -> str:
    """``text`` with every DSN password in it replaced by ``***``.

    ``source`` is the DSN ``text`` is about (a driver's error on connecting to
    it): its password is removed too where no DSN surrounds it, and so is the
    part after its first ``@`` where a host follows it (what a driver that cut
    the URL at that ``@`` quotes as the host).
    """
    shown = _PASSWORD_PARAM.sub(r"\1***", _URL.sub(_redact_url, text))
    if source:
        pieces = {}
        for password in _passwords(source):
            if password:
                pieces[password] = "***"
            if "@" in password:
                pieces[password.split("@", 1)[1] + "@"] = "***@"
        for piece in sorted(pieces, key=len, reverse=True):
            shown = shown.replace(piece, pieces[piece])
    return shown
