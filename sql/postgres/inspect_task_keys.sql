-- inspect_task_keys: the keys that point at any of the given tasks. No index covers
-- cairnq_task_keys.task_id, so this reads the key table once; callers batch their
-- ids and remember answers. Params: %(ids)s (a text array of task ids).
select key, task_id, created_at_ms, updated_at_ms
from cairnq_task_keys
where task_id = any(%(ids)s::text[])
order by key;
