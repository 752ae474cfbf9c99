-- cancel: a queued task is canceled at once; a running one gets the cooperative
-- cancel flag (refreshed on re-cancel). Terminal rows are untouched (no row
-- returned); the lease and worker_id never change here. Params: %(id)s.
update cairnq_tasks
set status = case when status = 'queued' then 'canceled' else status end,
    completed_at_ms = case
        when status = 'queued' then (extract(epoch from now()) * 1000)::bigint
        else completed_at_ms
    end,
    cancel_requested_at_ms = case
        when status = 'running' then (extract(epoch from now()) * 1000)::bigint
        else cancel_requested_at_ms
    end,
    updated_at_ms = (extract(epoch from now()) * 1000)::bigint
where id = %(id)s::text and status in ('queued', 'running')
returning *
