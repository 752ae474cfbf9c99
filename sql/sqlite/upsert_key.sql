-- upsert_key: point a key at a task; an existing key keeps its created_at_ms.
-- Params: :key, :task_id, :now_ms
insert into cairnq_task_keys as k (key, task_id, created_at_ms, updated_at_ms)
select :key, :task_id, :now_ms, :now_ms
where true
on conflict (key) do update
set (task_id, updated_at_ms) = (excluded.task_id, excluded.updated_at_ms);
