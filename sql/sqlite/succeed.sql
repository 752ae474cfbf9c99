-- succeed: raw success of an owned task, ignoring any cancel request (§4.17).
-- Params: :id, :worker_id, :result (JSON text or NULL), :message, :now_ms
update cairnq_tasks
set (status, result, progress) = ('succeeded', :result, 1.0),
    message = ifnull(:message, message),
    (lease_until_ms, completed_at_ms, updated_at_ms) = (null, :now_ms, :now_ms)
where id = :id and (status, worker_id) = ('running', :worker_id)
  and :now_ms < lease_until_ms -- the lease still holds
returning *;
