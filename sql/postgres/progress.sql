-- progress: an owned task's progress and message; NULL keeps the previous value.
-- Params: :id, :worker_id, :progress, :message. No row = lease lost.
update cairnq_tasks
set progress = coalesce(:progress::double precision, progress),
    message = coalesce(:message::text, message),
    updated_at_ms = (extract(epoch from now()) * 1000)::bigint
where id = :id::text
    and status = 'running'
    and worker_id = :worker_id::text
    and lease_until_ms > (extract(epoch from now()) * 1000)::bigint
returning *
