-- inspect_metrics_latency: due-to-done latency (completed_at_ms - run_at_ms, at least
-- 0) of succeeded and failed tasks, per queue and name, as a histogram to two
-- significant digits: the lower bound of each latency's bucket (the latency with
-- all but its two leading digits zeroed; exact under 100 ms) -> count. Same window
-- and cap as inspect_metrics_throughput. Params: %(since_ms)s, %(cap)s.
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
        select queue, name, greatest(completed_at_ms - run_at_ms, 0) as lat
        from (
            select queue, name, status, run_at_ms, completed_at_ms
            from cairnq_tasks
            where completed_at_ms >= %(since_ms)s
            order by completed_at_ms desc
            limit %(cap)s
        ) as recent
        where status in ('succeeded', 'failed')
    ) as latencies
) as buckets
group by queue, name, lower_ms;
