"""``cairnq-tui purge TARGET ID…``: a purge by id, run as the installed command on
both dialects against tasks cairnq 0.15.1 (the peer) wrote."""

from __future__ import annotations

from interop_support import Backend
from test_ops_cli import cli, seed, statuses


async def test_purge_by_id_deletes_only_the_terminal_ones(backend: Backend) -> None:
    ids = await seed(backend)
    peer = backend.peer()
    await peer.connect()
    try:
        extra = await peer.submit(name="charge", payload={"n": 3}, queue="spare")
        [claimed] = await peer.claim(queues=["spare"], worker_id="w2", lease_ms=30_000)
        await peer.succeed(task_id=claimed.id, worker_id="w2", result=None)
    finally:
        await peer.close()
    unknown = "task_0000000000000000000000000"
    given = [ids["broken"], ids["resize"], unknown, ids["done"], extra.id, ids["broken"]]

    dry = cli(backend, "purge", *given, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    first = dry.stdout.splitlines()[0]
    # The exact count first, and how many of the given ids were left alone, and why.
    assert first.startswith("3 terminal task(s) to purge of the 5 given id(s)"), first
    assert "1 not terminal" in first and "1 not found" in first
    listed = [line for line in dry.stdout.splitlines() if line.startswith("task_")]
    assert listed == [ids["broken"], ids["done"], extra.id]
    assert f"skipped {ids['resize']}: it is not terminal" in dry.stderr
    assert f"skipped {unknown}: not found" in dry.stderr
    assert "nothing written" in dry.stdout and len(statuses(backend)) == 6

    declined = cli(backend, "purge", *given, stdin="n\n")
    assert declined.returncode == 1 and "nothing written" in declined.stderr
    assert len(statuses(backend)) == 6

    capped = cli(backend, "purge", *given, "--limit", "2", stdin="y\n")
    assert capped.returncode == 0, capped.stderr
    assert capped.stdout.startswith("2 terminal task(s) to purge") and "1 over --limit 2" in (
        capped.stdout
    )
    assert "Purged 2 task(s)." in capped.stdout
    left = statuses(backend)
    assert ids["broken"] not in left and ids["done"] not in left
    assert left[extra.id] == "succeeded" and left[ids["resize"]] == "queued"
    # A live task is never deleted, by id either.
    live = cli(backend, "purge", ids["resize"], ids["mail1"], "--yes")
    assert live.returncode == 0 and "nothing to purge" in live.stdout
    assert "2 not terminal" in live.stdout
    assert statuses(backend) == left
    last = cli(backend, "purge", extra.id, "--yes")
    assert last.returncode == 0 and "Purged 1 task(s)." in last.stdout
    assert extra.id not in statuses(backend)
