-- inspect_running: running tasks by lease expiry, soonest (or already expired)
-- first, read through the partial cairnq_tasks_lease_idx (its predicate spelled out
-- as in the index). Params: %(limit)s.
select id, name, queue, worker_id, attempt, max_attempts, lease_until_ms,
       cancel_requested_at_ms, progress, substr(message, 1, 200) as message,
       updated_at_ms
from cairnq_tasks
where status = 'running' and lease_until_ms is not null
order by lease_until_ms, id
limit %(limit)s;
