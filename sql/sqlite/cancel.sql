-- cancel: a queued task ends canceled at once; a running one gets its cancel
-- flag (re)stamped and keeps running. Terminal or unknown ids match nothing.
-- Lease and worker_id are left alone (§4.8).
-- Params: :id, :now_ms
update cairnq_tasks set
    status = case status when 'queued' then 'canceled' else status end,
    completed_at_ms = case status when 'queued' then :now_ms else completed_at_ms end,
    cancel_requested_at_ms =
        case status when 'running' then :now_ms else cancel_requested_at_ms end,
    updated_at_ms = :now_ms
where id = :id and status in ('queued', 'running')
returning *;
