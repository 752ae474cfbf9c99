"""The recorder's count samples in the history file: one row per sample, changes only.

A sample is the count of tasks per (queue, name, status) at one time. Each
(queue, name, status) is a row of ``sample_keys`` (the name ``""`` stands for
"other": the names past the first ones counted by name). A row of ``samples``
holds, as a compact JSON list ``[key, count, key, count, ...]``:

- a *keyframe* (``full = 1``): every non-zero count of the sample (a key it does
  not name is zero);
- otherwise the keys whose count changed since the row before it in ``seq``
  order (a zero means the count fell to zero).

So a quiet target costs a few bytes per sample, and a busy one what changed.
A keyframe is written at least every ``KEYFRAME_EVERY_MS``, after a gap, and
whenever the row before is not the one this file wrote last (another console on
the same target writing too), so a change row always follows the state it was
computed from. Reads replay from the keyframe at or before their window.
Plain functions over a ``sqlite3`` connection; ``HistoryFile`` holds the lock.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

#: A keyframe at least this often (reads replay at most this far before a window).
KEYFRAME_EVERY_MS = 3_600_000

#: The name under which ``Inspector.name_counts``' "other" row is kept.
OTHER = ""

SAMPLES_SCHEMA = """
create table if not exists sample_keys (
    id integer primary key, queue text not null, name text not null,
    status text not null, unique (queue, name, status)
);
create table if not exists samples (
    seq integer primary key autoincrement, at_ms integer not null,
    full integer not null, cells text not null
);
create index if not exists samples_at on samples (at_ms);
"""

Cell = tuple[str, str, str]  # (queue, name, status)
Counted = tuple[str, str | None, str]  # the same, name None for "other"


@dataclass
class SampleChain:
    """What the file wrote last: the state a change row is computed from."""

    keys: dict[Cell, int] = field(default_factory=dict)
    state: dict[int, int] = field(default_factory=dict)
    last_seq: int | None = None
    keyframe_at: int | None = None


def load_keys(conn: sqlite3.Connection) -> dict[Cell, int]:
    rows = conn.execute("select id, queue, name, status from sample_keys").fetchall()
    return {(q, n, s): int(i) for i, q, n, s in rows}


def _key_id(conn: sqlite3.Connection, chain: SampleChain, cell: Cell) -> int:
    found = chain.keys.get(cell)
    if found is None:  # (new to this file, or another console added it)
        conn.execute(
            "insert into sample_keys (queue, name, status) values (?, ?, ?) "
            "on conflict (queue, name, status) do nothing",
            cell,
        )
        row = conn.execute(
            "select id from sample_keys where queue = ? and name = ? and status = ?", cell
        ).fetchone()
        found = chain.keys[cell] = int(row[0])
    return found


def write_sample(
    conn: sqlite3.Connection, chain: SampleChain, at_ms: int, counts: Mapping[Counted, int]
) -> None:
    """One sample row (inside the caller's transaction): a keyframe or the changes."""
    keys, state = chain.keys, {}
    for cell, n in counts.items():
        if n:
            k = keys.get(cell)  # type: ignore[arg-type]  # (a None name is never a key)
            if k is None:
                k = _key_id(conn, chain, (cell[0], cell[1] or OTHER, cell[2]))
            state[k] = int(n)
    last = conn.execute("select max(seq) from samples").fetchone()[0]
    full = (
        last is None
        or last != chain.last_seq
        or chain.keyframe_at is None
        or not 0 <= at_ms - chain.keyframe_at < KEYFRAME_EVERY_MS
    )
    if full:
        cells = sorted(state.items())
    else:
        before = chain.state
        cells = sorted(
            [(k, n) for k, n in state.items() if before.get(k) != n]
            + [(k, 0) for k in before if k not in state]
        )
    flat = json.dumps([v for pair in cells for v in pair], separators=(",", ":"))
    cur = conn.execute(
        "insert into samples (at_ms, full, cells) values (?, ?, ?)", (at_ms, int(full), flat)
    )
    chain.last_seq, chain.state = cur.lastrowid, state
    if full:
        chain.keyframe_at = at_ms


def forget(chain: SampleChain) -> None:
    """After rows were deleted: the next sample is a keyframe."""
    chain.last_seq = None


def read_depth(
    conn: sqlite3.Connection,
    since_ms: int,
    statuses: Sequence[str],
    queue: str | None,
    name: str | None,
) -> dict[str, list[tuple[int, int]]]:
    """Per queue: ``(at_ms, count)`` of ``statuses`` summed (of one name, if given),
    at every sample from ``since_ms`` on that saw the queue hold any task (of
    that name)."""
    keys = load_keys(conn)
    first = conn.execute(
        "select seq from samples where at_ms >= ? order by at_ms limit 1", (since_ms,)
    ).fetchone()
    if first is None:
        return {}
    start = conn.execute(
        "select seq from samples where seq <= ? and full = 1 order by seq desc limit 1",
        (first[0],),
    ).fetchone()
    if start is None:  # the deltas before the oldest keyframe cannot be read
        start = conn.execute(
            "select seq from samples where full = 1 and seq > ? order by seq limit 1",
            (first[0],),
        ).fetchone()
        if start is None:
            return {}
    rows = conn.execute(
        "select at_ms, full, cells from samples where seq >= ? order by seq", (start[0],)
    ).fetchall()
    queue_of = {
        i: c[0]
        for c, i in keys.items()
        if (queue is None or c[0] == queue) and (name is None or c[1] == name)
    }
    counted = {i for c, i in keys.items() if i in queue_of and c[2] in statuses}
    state: dict[int, int] = {}
    held: dict[str, int] = {}  # per queue: keys with a non-zero count
    total: dict[str, int] = {}  # per queue: the counted keys summed
    out: dict[str, list[tuple[int, int]]] = {}
    for at_ms, full, cells in rows:
        if full:
            state.clear()
            held.clear()
            total.clear()
        values = json.loads(cells)
        for k, n in zip(values[::2], values[1::2], strict=True):
            q = queue_of.get(k)
            if q is None:
                continue
            old = state.get(k, 0)
            if n:
                state[k] = n
            else:
                state.pop(k, None)
            held[q] = held.get(q, 0) + (n != 0) - (old != 0)
            if k in counted:
                total[q] = total.get(q, 0) + n - old
        if at_ms >= since_ms:
            for q, live in held.items():
                if live:
                    out.setdefault(q, []).append((int(at_ms), total.get(q, 0)))
    return out
