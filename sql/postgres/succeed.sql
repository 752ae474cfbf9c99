-- succeed: raw success of an owned task, ignoring any cancel request (workers
-- use complete). Params: :id, :worker_id, :result (JSON text or NULL), :message
-- (NULL keeps). No row = lease lost.
update cairnq_tasks
set status = 'succeeded',
    result = :result::jsonb,
    progress = 1.0,
    message = coalesce(:message::text, message),
    lease_until_ms = null,
    completed_at_ms = (extract(epoch from now()) * 1000)::bigint,
    updated_at_ms = (extract(epoch from now()) * 1000)::bigint
where id = :id::text
    and status = 'running'
    and worker_id = :worker_id::text
    and lease_until_ms > (extract(epoch from now()) * 1000)::bigint
returning *
