-- succeed: raw success of an owned task, ignoring any cancel request (workers
-- use complete). Params: %(id)s, %(worker_id)s, %(result)s (JSON text or NULL), %(message)s
-- (NULL keeps). No row = lease lost.
update cairnq_tasks
set status = 'succeeded',
    result = %(result)s::jsonb,
    progress = 1.0,
    message = coalesce(%(message)s::text, message),
    lease_until_ms = null,
    completed_at_ms = (extract(epoch from now()) * 1000)::bigint,
    updated_at_ms = (extract(epoch from now()) * 1000)::bigint
where id = %(id)s::text
    and status = 'running'
    and worker_id = %(worker_id)s::text
    and lease_until_ms > (extract(epoch from now()) * 1000)::bigint
returning *
