-- heartbeat_batch: extend every listed lease this worker still owns, each row
-- checked on its own; an id missing from the result is no longer held.
-- Params: :ids (JSON array), :worker_id, :lease_until_ms, :now_ms
update cairnq_tasks set
    lease_until_ms = :lease_until_ms,
    updated_at_ms = :now_ms
where id in (select value from json_each(:ids))
  and status = 'running'
  and worker_id = :worker_id
  and lease_until_ms > :now_ms
returning id, cancel_requested_at_ms;
