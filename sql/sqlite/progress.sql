-- progress: record progress and/or a message on an owned task; a NULL keeps
-- the previous value. Status is unchanged.
-- Params: :id, :worker_id, :progress, :message, :now_ms
update cairnq_tasks set
    progress = coalesce(:progress, progress),
    message = coalesce(:message, message),
    updated_at_ms = :now_ms
where id = :id
  and status = 'running'
  and worker_id = :worker_id
  and lease_until_ms > :now_ms
returning *;
