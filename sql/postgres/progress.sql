-- progress: an owned task's progress and message; NULL keeps the previous value.
-- Params: %(id)s, %(worker_id)s, %(progress)s, %(message)s. No row = lease lost.
update cairnq_tasks
set progress = coalesce(%(progress)s::double precision, progress),
    message = coalesce(%(message)s::text, message),
    updated_at_ms = (extract(epoch from now()) * 1000)::bigint
where id = %(id)s::text
    and status = 'running'
    and worker_id = %(worker_id)s::text
    and lease_until_ms > (extract(epoch from now()) * 1000)::bigint
returning *
