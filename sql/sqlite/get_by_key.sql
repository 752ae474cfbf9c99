-- get_by_key: the full row of the task a key points at, or no row.
-- Params: :key
select t.*
from cairnq_task_keys as k
join cairnq_tasks as t on t.id = k.task_id
where k.key = :key;
