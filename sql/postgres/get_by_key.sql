-- get_by_key: the task a key points at, or no row (also when the pointer outlived
-- its task). Params: %(key)s.
select t.*
from cairnq_task_keys as k
join cairnq_tasks as t on t.id = k.task_id
where k.key = %(key)s::text
