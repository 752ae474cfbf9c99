-- inspect_throughput: terminal entries per queue, status and minute since %(since_ms)s
-- (completions, failures and cancellations per minute). The literal terminal-status
-- list matches the partial cairnq_tasks_queue_completed_idx; the cost
-- follows the number of tasks finished in the window, not the table size.
-- Params: %(since_ms)s.
select queue, status, completed_at_ms / 60000 as minute, count(*) as n
from cairnq_tasks
where status in ('succeeded', 'failed', 'canceled')
  and completed_at_ms >= %(since_ms)s
group by queue, status, minute
order by queue, status, minute;
