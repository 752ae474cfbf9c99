"""Passwords out of anything shown: one redactor for the engine and the console.

A DSN reaches messages, titles and logs both on its own (a store's ``target``)
and inside other text (a driver's error quoting the URL it could not reach),
so ``redact_dsn`` takes any text and replaces every password it finds with
``***``: in a URL's user info, in a URL's ``password=`` query parameter, and in
a key/value DSN's ``password=`` (quoted or not).

A URL's user info ends at its *last* ``@`` before the query: a password may
itself contain ``@`` (``postgresql://u:p@ss@h/db``), and cutting at the first
one would show the rest of it. Redacting too much is harmless; too little is not.
"""

from __future__ import annotations

import re

_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s\"'<>]*")
_PASSWORD_PARAM = re.compile(r"(?i)(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&]+)")


def _redact_url(match: re.Match[str]) -> str:
    scheme, rest = match.group(0).split("://", 1)
    ends = [i for i in (rest.find("?"), rest.find("#")) if i >= 0]
    at = rest.rfind("@", 0, min(ends, default=len(rest)))
    if at >= 0 and ":" in rest[:at]:
        user = rest[:at].split(":", 1)[0]
        rest = f"{user}:***{rest[at:]}"
    return f"{scheme}://{rest}"


def redact_dsn(text: str) -> str:
    """``text`` with every DSN password in it replaced by ``***``."""
    return _PASSWORD_PARAM.sub(r"\1***", _URL.sub(_redact_url, text))
