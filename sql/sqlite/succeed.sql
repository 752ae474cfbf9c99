-- succeed: raw success of an owned task, ignoring any cancel request (§4.17).
-- Params: :id, :worker_id, :result (JSON text or NULL), :message, :now_ms
update cairnq_tasks set
    status = 'succeeded',
    result = :result,
    progress = 1.0,
    message = coalesce(:message, message),
    lease_until_ms = null,
    completed_at_ms = :now_ms,
    updated_at_ms = :now_ms
where id = :id
  and status = 'running'
  and worker_id = :worker_id
  and lease_until_ms > :now_ms
returning *;
