-- get_status_by_key: (id, status) of the task a key points at, resolved afresh.
-- Params: :key
select t.id, t.status
from cairnq_tasks as t
where t.id = (select k.task_id from cairnq_task_keys as k where k.key = :key);
