-- upsert_key: point a key at a task; an existing pointer is moved (its
-- created_at_ms kept). Params: %(key)s, %(task_id)s.
insert into cairnq_task_keys (key, task_id, created_at_ms, updated_at_ms)
values (
    %(key)s::text, %(task_id)s::text,
    (extract(epoch from now()) * 1000)::bigint,
    (extract(epoch from now()) * 1000)::bigint
)
on conflict (key) do update
set task_id = excluded.task_id, updated_at_ms = excluded.updated_at_ms
