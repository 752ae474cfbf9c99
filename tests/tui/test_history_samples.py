"""The history file's samples (issue 22.5): per (queue, name, status), changes only
between hourly keyframes, one transaction per sample, a simulated week inside
its bounds, and the audit trail committed durably while samples are not."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest
from console_states import NOW

from cairnq_tui.history import DEFAULT_MAX_BYTES, AuditEntry, HistoryFile, SeenFailure
from cairnq_tui.history._samples import KEYFRAME_EVERY_MS

DAY = 86_400_000
STEP = 10_000  # the console's sample period (SAMPLE_EVERY_S)


def rows(path: Path) -> list[tuple[int, int, str]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("select at_ms, full, cells from samples order by seq").fetchall()
    finally:
        conn.close()


def test_a_sample_stores_what_changed_and_reads_back_whole(tmp_path: Path) -> None:
    history = HistoryFile(tmp_path / "h.sqlite3", target="t")
    try:
        counts = {("q", "a", "queued"): 5, ("q", "b", "queued"): 2, ("q", "a", "running"): 1}
        history.record_sample(NOW, counts)
        history.record_sample(NOW + STEP, counts)  # nothing changed
        history.record_sample(NOW + 2 * STEP, {**counts, ("q", "b", "queued"): 0})
        history.record_sample(NOW + 3 * STEP, {("q", "a", "queued"): 7, ("r", None, "queued"): 4})
        written = rows(tmp_path / "h.sqlite3")
        assert [
            (full, cells.count(",") + 1 if cells != "[]" else 0) for _, full, cells in written
        ] == [
            (1, 6),  # the keyframe: three non-zero counts
            (0, 0),  # nothing changed: nothing stored
            (0, 2),  # b fell to zero
            (0, 6),  # a changed, a's running ended, r's "other" appeared
        ]
        assert history.depth(0) == {
            "q": [(NOW, 7), (NOW + STEP, 7), (NOW + 2 * STEP, 5), (NOW + 3 * STEP, 7)],
            "r": [(NOW + 3 * STEP, 4)],
        }
        assert history.depth(0, name="b") == {
            "q": [(NOW, 2), (NOW + STEP, 2)]  # then no b task is left in q
        }
        assert history.depth(0, statuses=("running",), queue="q") == {
            "q": [(NOW, 1), (NOW + STEP, 1), (NOW + 2 * STEP, 1), (NOW + 3 * STEP, 0)]
        }
        # A window starting mid-way replays from the keyframe before it.
        assert history.depth(NOW + 2 * STEP, queue="q") == {
            "q": [(NOW + 2 * STEP, 5), (NOW + 3 * STEP, 7)]
        }
    finally:
        history.close()


def test_keyframes_come_hourly_and_after_another_writer(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite3"
    one = HistoryFile(path, target="t")
    two = HistoryFile(path, target="t")  # a second console on the same target
    try:
        at = NOW
        for i in range(int(KEYFRAME_EVERY_MS / STEP) + 2):
            one.record_sample(at, {("q", "a", "queued"): i % 3})
            at += STEP
        fulls = [i for i, (_, full, _) in enumerate(rows(path)) if full]
        assert fulls == [0, KEYFRAME_EVERY_MS // STEP]
        # Interleaved writers: each row after the other's is a keyframe, so the
        # replay never applies one console's changes to the other's state.
        two.record_sample(at, {("q", "a", "queued"): 40})
        one.record_sample(at + STEP, {("q", "a", "queued"): 2})
        two.record_sample(at + 2 * STEP, {("q", "a", "queued"): 41})
        assert [full for _, full, _ in rows(path)[-3:]] == [1, 1, 1]
        assert one.depth(at)["q"] == [(at, 40), (at + STEP, 2), (at + 2 * STEP, 41)]
    finally:
        one.close()
        two.close()


def test_counts_failures_and_workers_of_a_sample_commit_together(tmp_path: Path) -> None:
    history = HistoryFile(tmp_path / "h.sqlite3", target="t")
    statements: list[str] = []
    history._conn.set_trace_callback(statements.append)
    try:
        failure = SeenFailure("task_1", 1, "n", "q", "failed", "E", "m", NOW)
        new = history.record_sample(
            NOW, {("q", "n", "failed"): 1}, [failure], [("worker_1", 2, ("n",), ("q",))]
        )
        assert new == 1
        assert [s for s in statements if s in ("begin", "commit")] == ["begin", "commit"]
        assert history.attempts("task_1") == [failure]
        assert history.workers_seen()[0].worker_id == "worker_1"
    finally:
        history.close()


def test_samples_commit_without_fsync_and_audit_entries_with_one(tmp_path: Path) -> None:
    history = HistoryFile(tmp_path / "h.sqlite3", target="t")
    statements: list[str] = []
    history._conn.set_trace_callback(statements.append)
    try:
        conn = history._conn
        assert conn.execute("pragma journal_mode").fetchone()[0] == "wal"
        assert conn.execute("pragma synchronous").fetchone()[0] == 1  # NORMAL
        statements.clear()
        history.record_sample(NOW, {("q", "n", "queued"): 1})
        assert not [s for s in statements if "synchronous" in s]
        history.audit(AuditEntry(NOW, "me", "t", "cancel", "{}", 1))
        audit = [i for i, s in enumerate(statements) if s.startswith("insert into audit")]
        assert statements[audit[0] - 1] == "pragma synchronous = full"
        assert statements[audit[0] + 1] == "pragma synchronous = normal"
        assert conn.execute("pragma synchronous").fetchone()[0] == 1
    finally:
        history.close()


def test_a_file_of_the_first_format_loses_its_samples_only(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite3"
    conn = sqlite3.connect(path)
    conn.executescript(
        """
        create table meta (key text primary key, value text not null);
        create table samples (at_ms integer not null, queue text not null,
            name text not null, status text not null, count integer not null);
        insert into samples values (1, 'q', '*', 'queued', 3);
        create table audit (at_ms integer not null, os_user text not null,
            target text not null, action text not null, detail text not null,
            count integer not null);
        insert into audit values (1, 'me', 't', 'cancel', '{}', 1);
        """
    )
    conn.close()
    history = HistoryFile(path, target="t")
    try:
        assert history.counts() == {"samples": 0, "failures": 0, "audit": 1}
        history.record_sample(NOW, {("q", "n", "queued"): 2})
        assert history.depth(0) == {"q": [(NOW, 2)]}
    finally:
        history.close()
    again = HistoryFile(path, target="t")  # opened again: nothing more is dropped
    try:
        assert again.counts()["samples"] == 1
    finally:
        again.close()


@pytest.mark.slow
def test_a_simulated_week_fits_well_inside_the_bounds(tmp_path: Path) -> None:
    """A week of samples every 10 s of 4 queues x 20 names (a backlog moving
    every sample, failures arriving) and 100,000 failures seen: the file stays
    far under 50 MB, and two hours later the first two hours are gone."""
    rng = random.Random(7)
    history = HistoryFile(tmp_path / "h.sqlite3", target="t")
    queues, names = [f"queue_{q}" for q in range(4)], [f"job.{n:02d}" for n in range(20)]
    counts: dict[tuple[str, str | None, str], int] = {}
    for q in queues:
        for n in names:
            counts[(q, n, "queued")] = rng.randrange(50)
            counts[(q, n, "succeeded")] = 10_000
            counts[(q, n, "failed")] = rng.randrange(500)
    samples = (7 * DAY + 2 * KEYFRAME_EVERY_MS) // STEP
    failures_per_sample = 100_000 / (7 * DAY // STEP)
    owed, seen, week_bytes = 0.0, 0, 0
    try:
        for i in range(samples):
            at = NOW + i * STEP
            for _ in range(3):  # a few cells move each sample
                cell = (rng.choice(queues), rng.choice(names), "queued")
                counts[cell] = max(0, counts[cell] + rng.randint(-3, 3))
            owed += failures_per_sample
            batch = []
            while owed >= 1:
                owed -= 1
                seen += 1
                q, n = rng.choice(queues), rng.choice(names)
                counts[(q, n, "failed")] += 1
                batch.append(
                    SeenFailure(
                        f"task_{seen:026d}", 1, n, q, "failed", "TimeoutError",
                        f"step {seen % 50} timed out after {rng.randrange(9_999)} ms", at,
                    )
                )  # fmt: skip
            history.record_sample(at, counts, batch)
            if i % 60 == 0:  # every 10 minutes, as the recorder prunes
                history.prune(at)
            if i == 7 * DAY // STEP:
                week_bytes = history.size_bytes()
        assert week_bytes < DEFAULT_MAX_BYTES // 2, week_bytes
        end = NOW + (samples - 1) * STEP
        history.prune(end)
        oldest = rows(tmp_path / "h.sqlite3")[0][0]
        assert end - 7 * DAY <= oldest < end - 7 * DAY + KEYFRAME_EVERY_MS
        depth = history.depth(end - DAY)
        assert len(depth["queue_0"]) == DAY // STEP + 1  # (both ends)
    finally:
        history.close()
