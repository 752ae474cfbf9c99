-- get_by_key: the full row of the task a key points at, or no row.
-- Params: :key
select t.*
from cairnq_tasks as t
where t.id = (select k.task_id from cairnq_task_keys as k where k.key = :key);
