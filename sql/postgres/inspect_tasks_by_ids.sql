-- inspect_tasks_by_ids: the light columns of the listed tasks, newest first (a
-- failure group's tasks, a selection shown before an action). One primary-key
-- lookup per id. Params: %(ids)s (a text array of task ids).
select id, name, queue, status, attempt, max_attempts, priority, worker_id, lease_until_ms,
       run_at_ms, cancel_requested_at_ms, progress, substr(message, 1, 200) as message,
       created_at_ms, updated_at_ms, completed_at_ms
from cairnq_tasks
where id = any(%(ids)s::text[])
order by id desc;
