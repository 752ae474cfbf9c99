-- complete: the worker's finaliser for an owned task. A cancel request wins:
-- the task ends canceled keeping its old result and progress; otherwise it
-- succeeds with :result and progress 1.0.
-- Params: :id, :worker_id, :result (JSON text or NULL), :now_ms
update cairnq_tasks set
    status = case when cancel_requested_at_ms is null then 'succeeded' else 'canceled' end,
    result = case when cancel_requested_at_ms is null then :result else result end,
    progress = case when cancel_requested_at_ms is null then 1.0 else progress end,
    lease_until_ms = null,
    completed_at_ms = :now_ms,
    updated_at_ms = :now_ms
where id = :id
  and status = 'running'
  and worker_id = :worker_id
  and lease_until_ms > :now_ms
returning *;
