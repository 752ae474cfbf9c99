-- complete_many: complete (same rule per row) for several owned tasks that
-- return no result, in one statement: a cancel request wins and keeps the old
-- result and progress; otherwise succeeded with a NULL result and progress 1.0.
-- Each row is checked on its own; an id missing from the result lost its lease.
-- Params: :ids (JSON array), :worker_id, :now_ms. Returns the ids settled.
update cairnq_tasks
set (status, result, progress) = (
        iif(cancel_requested_at_ms is null, 'succeeded', 'canceled'),
        iif(cancel_requested_at_ms is null, null, result),
        iif(cancel_requested_at_ms is null, 1.0, progress)
    ),
    (lease_until_ms, completed_at_ms, updated_at_ms) = (null, :now_ms, :now_ms)
where id in (select j.value from json_each(:ids) as j)
  and (status, worker_id) = ('running', :worker_id)
  and :now_ms < lease_until_ms -- each lease still holds
returning id;
