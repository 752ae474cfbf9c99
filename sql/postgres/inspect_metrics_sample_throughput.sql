-- inspect_metrics_sample_throughput: terminal tasks per queue, name, status and time
-- bucket (completed_at_ms / %(bucket_ms)s), counted over a sample of the window: the
-- engine reads it when the window holds more completions than a metrics read may
-- look at, and scales each bucket's counts to the exact per-status totals of
-- inspect_metrics_totals (Metrics.estimated).
-- The rows read are those completed inside %(slices)s short time slices of the window,
-- one per stride of %(stride_ms)s from %(start_ms)s (the first bucket's start), each
-- %(slice_ms)s long at a fixed pseudo-random offset into its stride (below %(jitter_ms)s,
-- so a workload that completes on round seconds is not always in or out). Each
-- slice is a range of a completion index; the rows outside the slices are never
-- touched, so the cost follows the sample, not the window.
-- (A lateral range per slice, kept apart by "offset 0", so that the planner
-- cannot turn the slices into one filter over the whole window; the store runs
-- it with JIT off, whose compile time dwarfs the read: postgres.read_statement.)
-- Params: %(since_ms)s, %(bucket_ms)s, %(start_ms)s, %(stride_ms)s, %(slice_ms)s, %(jitter_ms)s, %(slices)s.
with bounds as (
    select greatest(%(since_ms)s::bigint, %(start_ms)s::bigint + i * %(stride_ms)s::bigint
                    + (i * 2654435761) %% %(jitter_ms)s::bigint) as lo,
           %(start_ms)s::bigint + i * %(stride_ms)s::bigint
           + (i * 2654435761) %% %(jitter_ms)s::bigint + %(slice_ms)s::bigint as hi
    from generate_series(0, %(slices)s::bigint - 1) as i
)
select t.queue, t.name, t.status, t.completed_at_ms / %(bucket_ms)s::bigint as bucket, count(*) as n
from bounds as s
cross join lateral (
    select queue, name, status, completed_at_ms
    from cairnq_tasks
    where completed_at_ms >= s.lo and completed_at_ms < s.hi
    offset 0
) as t
group by t.queue, t.name, t.status, bucket;
