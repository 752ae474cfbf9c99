-- inspect_metrics_sample_latency: due-to-done latency of succeeded and failed tasks per
-- queue and name, as inspect_metrics_latency's histogram, over the same sample of
-- the window as inspect_metrics_sample_throughput (the percentiles are estimated
-- from the rows sampled; Latency.count says how many).
-- The rows read are those completed inside :slices short time slices of the window,
-- one per stride of :stride_ms from :start_ms (the first bucket's start), each
-- :slice_ms long at a fixed pseudo-random offset into its stride (below :jitter_ms,
-- so a workload that completes on round seconds is not always in or out). Each
-- slice is a range of a completion index; the rows outside the slices are never
-- touched, so the cost follows the sample, not the window.
-- Params: :since_ms, :start_ms, :stride_ms, :slice_ms, :jitter_ms, :slices.
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
select queue, name, lower_ms, count(*) as n
from (
    select queue, name,
           case when lat < 100 then lat
                when lat < 1000 then lat / 10 * 10
                when lat < 10000 then lat / 100 * 100
                when lat < 100000 then lat / 1000 * 1000
                when lat < 1000000 then lat / 10000 * 10000
                when lat < 10000000 then lat / 100000 * 100000
                when lat < 100000000 then lat / 1000000 * 1000000
                when lat < 1000000000 then lat / 10000000 * 10000000
                when lat < 10000000000 then lat / 100000000 * 100000000
                when lat < 100000000000 then lat / 1000000000 * 1000000000
                when lat < 1000000000000 then lat / 10000000000 * 10000000000
                when lat < 10000000000000 then lat / 100000000000 * 100000000000
                when lat < 100000000000000 then lat / 1000000000000 * 1000000000000
                when lat < 1000000000000000 then lat / 10000000000000 * 10000000000000
                when lat < 10000000000000000 then lat / 100000000000000 * 100000000000000
                when lat < 100000000000000000 then lat / 1000000000000000 * 1000000000000000
                when lat < 1000000000000000000 then lat / 10000000000000000 * 10000000000000000
                else lat / 100000000000000000 * 100000000000000000 end as lower_ms
    from (
        select cairnq_tasks.queue, cairnq_tasks.name,
               max(cairnq_tasks.completed_at_ms - cairnq_tasks.run_at_ms, 0) as lat
        from bounds as s
        join cairnq_tasks
          on cairnq_tasks.completed_at_ms >= s.lo and cairnq_tasks.completed_at_ms < s.hi
        where cairnq_tasks.status in ('succeeded', 'failed')
    )
) as buckets
group by queue, name, lower_ms;
