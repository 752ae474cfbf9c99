-- inspect_metrics_sample_latency: due-to-done latency of succeeded and failed tasks per
-- queue and name, as inspect_metrics_latency's histogram, over the same sample of
-- the window as inspect_metrics_sample_throughput (the percentiles are estimated
-- from the rows sampled; Latency.count says how many).
-- The rows read are those completed inside %(slices)s short time slices of the window,
-- one per stride of %(stride_ms)s from %(start_ms)s (the first bucket's start), each
-- %(slice_ms)s long at a fixed pseudo-random offset into its stride (below %(jitter_ms)s,
-- so a workload that completes on round seconds is not always in or out). Each
-- slice is a range of a completion index; the rows outside the slices are never
-- touched, so the cost follows the sample, not the window.
-- (A lateral range per slice, kept apart by "offset 0", so that the planner
-- cannot turn the slices into one filter over the whole window; the store runs
-- it with JIT off, whose compile time dwarfs the read: postgres.read_statement.)
-- Params: %(since_ms)s, %(start_ms)s, %(stride_ms)s, %(slice_ms)s, %(jitter_ms)s, %(slices)s.
with bounds as (
    select greatest(%(since_ms)s::bigint, %(start_ms)s::bigint + i * %(stride_ms)s::bigint
                    + (i * 2654435761) %% %(jitter_ms)s::bigint) as lo,
           %(start_ms)s::bigint + i * %(stride_ms)s::bigint
           + (i * 2654435761) %% %(jitter_ms)s::bigint + %(slice_ms)s::bigint as hi
    from generate_series(0, %(slices)s::bigint - 1) as i
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
        select t.queue, t.name, greatest(t.completed_at_ms - t.run_at_ms, 0) as lat
        from bounds as s
        cross join lateral (
            select queue, name, status, run_at_ms, completed_at_ms
            from cairnq_tasks
            where completed_at_ms >= s.lo and completed_at_ms < s.hi
            offset 0
        ) as t
        where t.status in ('succeeded', 'failed')
    ) as latencies
) as buckets
group by queue, name, lower_ms;
