"""doctor's judgement of what the server says (the reads are tested end to end in
tests/interop/test_ops_cli.py; a skewed server clock cannot be staged there)."""

from __future__ import annotations

from cairnq_tui.ops._doctor import server_checks
from engine.health import ServerHealth


def server(skew_ms: int, trip_ms: int = 10, **settings: str) -> ServerHealth:
    sent = 1_000_000
    return ServerHealth(
        server_ms=sent + trip_ms // 2 + skew_ms,
        sent_ms=sent,
        received_ms=sent + trip_ms,
        synchronous_commit=settings.get("synchronous_commit", "on"),
        fsync=settings.get("fsync", "on"),
        db_bytes=8_000_000,
    )


def by_name(health: ServerHealth) -> dict[str, tuple[str, str]]:
    return {c.check: (c.status, c.detail) for c in server_checks(health)}


def test_a_server_clock_more_than_a_second_off_is_a_warning() -> None:
    assert by_name(server(0))["clock"][0] == "OK"
    assert by_name(server(900))["clock"][0] == "OK"
    ahead = by_name(server(1_500))["clock"]
    assert ahead[0] == "WARN" and "+1.5s" in ahead[1]
    behind = by_name(server(-3_000))["clock"]
    assert behind[0] == "WARN" and "-3.0s" in behind[1]
    # Half the round trip is what the reading cannot tell apart from skew.
    assert by_name(server(1_200, trip_ms=600))["clock"][0] == "OK"


def test_durability_settings() -> None:
    assert by_name(server(0))["synchronous"][0] == "OK"
    assert by_name(server(0, synchronous_commit="off"))["synchronous"][0] == "WARN"
    assert by_name(server(0, fsync="off"))["synchronous"][0] == "FAIL"
