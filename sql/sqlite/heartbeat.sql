-- heartbeat: extend the lease of a task this worker still owns; no row = lost.
-- Params: :id, :worker_id, :lease_until_ms, :now_ms
update cairnq_tasks
set (lease_until_ms, updated_at_ms) = (:lease_until_ms, :now_ms)
where id = :id and (status, worker_id) = ('running', :worker_id)
  and :now_ms < lease_until_ms -- the lease still holds
returning *;
