-- complete: the worker's finaliser for an owned task. A cancel request wins:
-- the task ends canceled keeping its old result and progress; otherwise it
-- succeeds with :result and progress 1.0.
-- Params: :id, :worker_id, :result (JSON text or NULL), :now_ms
update cairnq_tasks
set (status, result, progress) = (
        iif(cancel_requested_at_ms is null, 'succeeded', 'canceled'),
        iif(cancel_requested_at_ms is null, :result, result),
        iif(cancel_requested_at_ms is null, 1.0, progress)
    ),
    (lease_until_ms, completed_at_ms, updated_at_ms) = (null, :now_ms, :now_ms)
where id = :id and (status, worker_id) = ('running', :worker_id)
  and :now_ms < lease_until_ms -- the lease still holds
returning *;
