-- heartbeat: extend the lease of a task this worker still owns; no row = lost.
-- Params: :id, :worker_id, :lease_until_ms, :now_ms
update cairnq_tasks set
    lease_until_ms = :lease_until_ms,
    updated_at_ms = :now_ms
where id = :id
  and status = 'running'
  and worker_id = :worker_id
  and lease_until_ms > :now_ms
returning *;
