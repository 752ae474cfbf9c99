-- inspect_recent_finished: per queue, how many tasks succeeded and failed since %(since_ms)s
-- (the console's rolling "per minute" rates read the last 60 s, not the last full
-- minute). The literal terminal-status list matches the partial
-- cairnq_tasks_queue_completed_idx: the cost follows the tasks finished in the window.
-- Params: %(since_ms)s.
select queue, status, count(*) as n
from cairnq_tasks
where status in ('succeeded', 'failed', 'canceled')
  and completed_at_ms >= %(since_ms)s::bigint
  and status <> 'canceled'
group by queue, status
order by queue, status;
