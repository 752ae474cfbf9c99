"""A payload cairnq 0.15.1 writes deeper than the engine reads fails only itself.

With its recursion limit raised, the SDK's encoder writes a list nested 1,100
deep (SQLite keeps the text, jsonb keeps the value). The engine's claims hand
out the good tasks around it and fail it once, naming the reason; ``get`` shows
its raw text.
"""

from __future__ import annotations

import sys

from interop_support import Backend, Pair, rows

from engine._json import MAX_DEPTH
from engine.inspection import UndecodableJSON


async def test_a_too_deep_peer_payload_fails_alone(pair: Pair, backend: Backend) -> None:
    deep: object = []
    for _ in range(1_099):
        deep = [deep]
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(10_000)
    try:
        bad = await pair.peer.submit(name="job", payload=deep, priority=5)
    finally:
        sys.setrecursionlimit(limit)
    good = [(await pair.peer.submit(name="job", payload={"i": i})).id for i in range(5)]

    claimed = await pair.engine.claim(queues=["default"], worker_id="w", limit=5)
    assert sorted(t.id for t in claimed) == sorted(good)

    failed = await pair.engine.get(bad.id)
    assert failed is not None and (failed.status, failed.attempt) == ("failed", 1)
    assert isinstance(failed.error, dict) and failed.error["code"] == "undecodable_json"
    assert isinstance(failed.payload, UndecodableJSON)
    assert failed.payload.reason == f"nested deeper than {MAX_DEPTH} levels"
    assert failed.payload.text.replace(" ", "") == "[" * 1_100 + "]" * 1_100
    # What the peer would read (its own decoder stops at this depth too).
    status = rows(backend, "select status, attempt from cairnq_tasks where id = ?", (bad.id,))
    assert status == [("failed", 1)]
