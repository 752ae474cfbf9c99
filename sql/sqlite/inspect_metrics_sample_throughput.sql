-- inspect_metrics_sample_throughput: terminal tasks per queue, name, status and time
-- bucket (completed_at_ms / :bucket_ms), counted over a sample of the window: the
-- engine reads it when the window holds more completions than a metrics read may
-- look at, and scales each bucket's counts to the exact per-status totals of
-- inspect_metrics_totals (Metrics.estimated).
-- The rows read are those completed inside :slices short time slices of the window,
-- one per stride of :stride_ms from :start_ms (the first bucket's start), each
-- :slice_ms long at a fixed pseudo-random offset into its stride (below :jitter_ms,
-- so a workload that completes on round seconds is not always in or out). Each
-- slice is a range of a completion index; the rows outside the slices are never
-- touched, so the cost follows the sample, not the window.
-- Params: :since_ms, :bucket_ms, :start_ms, :stride_ms, :slice_ms, :jitter_ms, :slices.
with recursive slices(i) as (
    select 0
    union all
    select i + 1 from slices where i + 1 < :slices
),
bounds as (
    select max(:since_ms, :start_ms + i * :stride_ms + (i * 2654435761) % :jitter_ms) as lo,
           :start_ms + i * :stride_ms + (i * 2654435761) % :jitter_ms + :slice_ms as hi
    from slices
)
select cairnq_tasks.queue, cairnq_tasks.name, cairnq_tasks.status,
       cairnq_tasks.completed_at_ms / :bucket_ms as bucket, count(*) as n
from bounds as s
join cairnq_tasks
  on cairnq_tasks.completed_at_ms >= s.lo and cairnq_tasks.completed_at_ms < s.hi
group by cairnq_tasks.queue, cairnq_tasks.name, cairnq_tasks.status, bucket;
