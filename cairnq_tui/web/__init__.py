"""The browser side of ``cairnq-tui serve``: the page, its sessions, and the gate
that answers them only to the operator's own tab (see ``_gate``)."""

from cairnq_tui.web._gate import Gate, GateError, check_token, is_loopback, new_token
from cairnq_tui.web._server import DEFAULT_MAX_SESSIONS, WebConsole

__all__ = [
    "DEFAULT_MAX_SESSIONS",
    "Gate",
    "GateError",
    "WebConsole",
    "check_token",
    "is_loopback",
    "new_token",
]
