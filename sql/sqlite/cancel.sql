-- cancel: a queued task ends canceled at once; a running one gets its cancel
-- flag (re)stamped and keeps running. Terminal or unknown ids match nothing.
-- Lease and worker_id are left alone (§4.8).
-- Params: :id, :now_ms
update cairnq_tasks
set (status, completed_at_ms) = (
        iif(status = 'queued', 'canceled', status),
        iif(status = 'queued', :now_ms, completed_at_ms)
    ),
    cancel_requested_at_ms = iif(status = 'running', :now_ms, cancel_requested_at_ms),
    updated_at_ms = :now_ms
where status in ('queued', 'running') and id = :id
returning *;
