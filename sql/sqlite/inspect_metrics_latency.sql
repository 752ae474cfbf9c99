-- inspect_metrics_latency: due-to-done latency (completed_at_ms - run_at_ms, at least
-- 0) of succeeded and failed tasks, per queue and name, as a histogram to two
-- significant digits: (digits, leading two digits) -> count. Same window and cap
-- as inspect_metrics_throughput. Params: :since_ms, :cap.
select queue, name, length(cast(lat as text)) as digits,
       cast(substr(cast(lat as text), 1, 2) as integer) as lead, count(*) as n
from (
    select queue, name, max(completed_at_ms - run_at_ms, 0) as lat
    from (
        select queue, name, status, run_at_ms, completed_at_ms
        from cairnq_tasks
        where completed_at_ms >= :since_ms
        order by completed_at_ms desc
        limit :cap
    )
    where status in ('succeeded', 'failed')
)
group by queue, name, digits, lead;
