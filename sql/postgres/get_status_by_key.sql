-- get_status_by_key: (id, status) of the task a key points at right now.
-- Params: %(key)s.
select t.id, t.status
from cairnq_task_keys as k
join cairnq_tasks as t on t.id = k.task_id
where k.key = %(key)s::text
