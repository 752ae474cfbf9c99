"""History from the retained rows: throughput and due-to-done latency over a window.

First the exact finished tasks per status and time bucket, from the (status,
completed_at_ms) index alone (no table row is read). When the window holds at
most ``sample`` completions (``DEFAULT_METRICS_SAMPLE``), or ``cap`` is smaller,
two reads walk the completion index from the newest completion back to the
window's start, at most ``cap`` rows: one counts finished tasks per queue, name,
status and bucket, the other builds a latency histogram (``completed_at_ms -
run_at_ms``) to two significant digits per queue and name, from which p50 / p95 /
p99 are read. Exact.

When the window holds more, reading every row (a table row per completion, a few
microseconds each with no index of ours) is what made a 24 h read of a busy
database cost seconds, so the same two reads look at a sample instead: the rows
completed inside short time slices spread over the window (ten per bucket, each
at a pseudo-random offset, their length the fraction ``sample / completions`` of
the stride), each slice a range of a completion index. The per-name counts of
each (status, bucket) are scaled to that bucket's exact total, and the
percentiles come from the sampled rows; ``Metrics.estimated`` says so and
``completions_read`` / ``completions`` say from how many of how many rows.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterable
from dataclasses import dataclass

from engine._inspect_reads import InspectorReads

#: Completions a metrics read looks at, at most (newest first).
DEFAULT_METRICS_CAP = 2_000_000
#: Above this many completions in the window, metrics are estimated from a sample
#: of about this many rows (the exact per-status totals are still read).
DEFAULT_METRICS_SAMPLE = 20_000
#: Sample slices per bucket.
_SLICES_PER_BUCKET = 10


@dataclass(frozen=True, slots=True)
class Latency:
    """Due-to-done latency of ``count`` finished tasks, from a histogram.

    The percentiles are exact below 100 ms and to two significant digits above
    (the middle of the histogram bucket). None when ``count`` is 0.
    """

    count: int
    p50_ms: int | None
    p95_ms: int | None
    p99_ms: int | None
    histogram: tuple[tuple[int, int], ...]  # (bucket's lower bound in ms, count), ascending

    @classmethod
    def of(cls, histogram: Iterable[tuple[int, int]]) -> Latency:
        merged: dict[int, int] = {}
        for lower, n in histogram:
            merged[lower] = merged.get(lower, 0) + n
        ordered = tuple(sorted(merged.items()))
        total = sum(n for _, n in ordered)
        return cls(
            count=total,
            p50_ms=_percentile(ordered, total, 0.50),
            p95_ms=_percentile(ordered, total, 0.95),
            p99_ms=_percentile(ordered, total, 0.99),
            histogram=ordered,
        )


def _bucket_middle(lower: int) -> int:
    if lower < 100:
        return lower
    width = int(10 ** (len(str(lower)) - 2))
    return lower + width // 2


def _percentile(ordered: tuple[tuple[int, int], ...], total: int, q: float) -> int | None:
    if total == 0:
        return None
    rank = max(1, math.ceil(q * total))
    seen = 0
    for lower, n in ordered:
        seen += n
        if seen >= rank:
            return _bucket_middle(lower)
    return _bucket_middle(ordered[-1][0])


@dataclass(frozen=True, slots=True)
class MetricSeries:
    """One queue and task name over the window: counts per bucket, oldest first."""

    queue: str
    name: str
    succeeded: tuple[int, ...]
    failed: tuple[int, ...]
    canceled: tuple[int, ...]
    latency: Latency

    def per_minute(self, counts: tuple[int, ...], bucket_ms: int) -> tuple[float, ...]:
        """``counts`` (one of this series' tuples) as a rate per minute."""
        return tuple(c * 60_000 / bucket_ms for c in counts)


@dataclass(frozen=True, slots=True)
class Metrics:
    """Throughput and latency per queue and name over ``[since_ms, until_ms]``.

    Bucket ``i`` of every series covers ``bucket_start_ms + i * bucket_ms``.
    ``completions_read`` tasks were read; ``capped`` says the window held more
    than ``cap`` and only the newest ``cap`` were counted. ``completions`` is the
    exact number of finished tasks in the window (None when not counted).
    ``estimated``: the window held more than the sample size, so the series were
    read from a sample of ``completions_read`` rows: each bucket's counts are
    scaled to its exact per-status total, and the latencies are the sample's
    (``Latency.count`` says how many rows they come from).
    """

    since_ms: int
    until_ms: int
    bucket_ms: int
    bucket_start_ms: int
    series: tuple[MetricSeries, ...]
    completions_read: int
    cap: int
    completions: int | None = None
    estimated: bool = False

    @property
    def capped(self) -> bool:
        return not self.estimated and self.completions_read >= self.cap

    @property
    def note(self) -> str:
        """What the figures come from, for a caption ("" when exact and whole)."""
        if self.estimated:
            return (
                f"estimated from a sample of {self.completions_read:,} of "
                f"{self.completions or 0:,} completions"
            )
        if self.capped:
            return f"the newest {self.completions_read:,} completions"
        return ""

    def by_queue(self) -> tuple[MetricSeries, ...]:
        """The series summed over names, one per queue (``name`` is ``"*"``)."""
        out: dict[str, list[MetricSeries]] = {}
        for s in self.series:
            out.setdefault(s.queue, []).append(s)
        return tuple(
            MetricSeries(
                queue=queue,
                name="*",
                succeeded=_sum(s.succeeded for s in parts),
                failed=_sum(s.failed for s in parts),
                canceled=_sum(s.canceled for s in parts),
                latency=Latency.of(pair for s in parts for pair in s.latency.histogram),
            )
            for queue, parts in sorted(out.items())
        )


def _sum(rows: Iterable[tuple[int, ...]]) -> tuple[int, ...]:
    return tuple(sum(col) for col in zip(*rows, strict=True))


async def metrics(
    inspector: InspectorReads,
    *,
    window_ms: int,
    buckets: int = 60,
    cap: int = DEFAULT_METRICS_CAP,
    sample: int = DEFAULT_METRICS_SAMPLE,
) -> Metrics:
    """See ``Inspector.metrics``."""
    for what, value, low in (
        ("window_ms", window_ms, 60_000),
        ("buckets", buckets, 1),
        ("cap", cap, 1),
        ("sample", sample, 1),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{what} must be an integer >= {low}, got {value!r}")
    now = inspector.clock()
    since = now - window_ms
    bucket_ms = max(60_000, math.ceil(window_ms / buckets / 60_000) * 60_000)
    first = since // bucket_ms
    width = now // bucket_ms - first + 1
    totals: dict[tuple[str, int], int] = {}
    for r in await inspector._read(
        "inspect_metrics_totals", {"since_ms": since, "bucket_ms": bucket_ms}
    ):
        totals[(str(r["status"]), int(r["bucket"]) - first)] = int(r["n"])
    completions = sum(totals.values())
    estimated = completions > sample and cap > sample
    if estimated:
        stride = bucket_ms // _SLICES_PER_BUCKET
        slice_ms = max(1, min(stride, math.ceil(stride * sample / completions)))
        start = first * bucket_ms
        sliced = {
            "since_ms": since,
            "start_ms": start,
            "stride_ms": stride,
            "slice_ms": slice_ms,
            "jitter_ms": stride - slice_ms + 1,
            "slices": (now - start) // stride + 1,
        }
        counts, latencies = await asyncio.gather(
            inspector._read(
                "inspect_metrics_sample_throughput", {**sliced, "bucket_ms": bucket_ms}
            ),
            inspector._read("inspect_metrics_sample_latency", sliced),
        )
    else:
        # Two reads of the same window, side by side (Postgres runs them on two
        # connections; SQLite's single reader takes them in turn).
        params = {"since_ms": since, "cap": cap, "bucket_ms": bucket_ms}
        counts, latencies = await asyncio.gather(
            inspector._read("inspect_metrics_throughput", params),
            inspector._read("inspect_metrics_latency", {"since_ms": since, "cap": cap}),
        )
    per: dict[tuple[str, str], dict[str, list[int]]] = {}
    read = 0
    sampled: dict[tuple[str, int], int] = {}
    for r in counts:
        key = (str(r["queue"]), str(r["name"]))
        series = per.setdefault(key, {s: [0] * width for s in ("succeeded", "failed", "canceled")})
        index = int(r["bucket"]) - first
        n = int(r["n"])
        read += n
        if r["status"] in series and 0 <= index < width:
            series[str(r["status"])][index] += n
            sampled[(str(r["status"]), index)] = sampled.get((str(r["status"]), index), 0) + n
    if estimated:
        _scale(per, totals, sampled)
    hist: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for r in latencies:
        key = (str(r["queue"]), str(r["name"]))
        hist.setdefault(key, []).append((int(r["lower_ms"]), int(r["n"])))
    out = tuple(
        MetricSeries(
            queue=key[0],
            name=key[1],
            succeeded=tuple(per[key]["succeeded"]),
            failed=tuple(per[key]["failed"]),
            canceled=tuple(per[key]["canceled"]),
            latency=Latency.of(hist.get(key, [])),
        )
        for key in sorted(per)
    )
    return Metrics(
        since_ms=since,
        until_ms=now,
        bucket_ms=bucket_ms,
        bucket_start_ms=first * bucket_ms,
        series=out,
        completions_read=read,
        cap=cap,
        completions=completions,
        estimated=estimated,
    )


def _scale(
    per: dict[tuple[str, str], dict[str, list[int]]],
    totals: dict[tuple[str, int], int],
    sampled: dict[tuple[str, int], int],
) -> None:
    """Scale each (status, bucket)'s sampled per-name counts to the exact total,
    rounding so that they still sum to it (largest remainders first)."""
    for (status, index), got in sampled.items():
        exact = totals.get((status, index), 0)
        shares = [
            (series[status][index] * exact / got, key)
            for key, series in per.items()
            if series[status][index]
        ]
        floors = {key: int(share) for share, key in shares}
        left = exact - sum(floors.values())
        for _, key in sorted(shares, key=lambda sk: sk[0] - int(sk[0]), reverse=True)[:left]:
            floors[key] += 1
        for key, value in floors.items():
            per[key][status][index] = value
