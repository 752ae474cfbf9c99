-- heartbeat_batch: extend every listed lease this worker still owns, each row
-- checked on its own; an id missing from the result is no longer held.
-- Params: :ids (JSON array), :worker_id, :lease_until_ms, :now_ms
update cairnq_tasks
set (lease_until_ms, updated_at_ms) = (:lease_until_ms, :now_ms)
where id in (select j.value from json_each(:ids) as j)
  and (status, worker_id) = ('running', :worker_id)
  and :now_ms < lease_until_ms -- each lease still holds
returning id, cancel_requested_at_ms;
