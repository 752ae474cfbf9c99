-- progress: record progress and/or a message on an owned task; a NULL keeps
-- the previous value. Status is unchanged.
-- Params: :id, :worker_id, :progress, :message, :now_ms
update cairnq_tasks
set (progress, message, updated_at_ms) =
        (ifnull(:progress, progress), ifnull(:message, message), :now_ms)
where id = :id and (status, worker_id) = ('running', :worker_id)
  and :now_ms < lease_until_ms -- the lease still holds
returning *;
