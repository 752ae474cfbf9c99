-- get_key: the task id a key points at, or no row.
-- Params: :key
select k.task_id from cairnq_task_keys as k where k.key = :key;
