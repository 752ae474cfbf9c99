-- complete: the worker's finaliser for an owned task. Cancel requested ->
-- canceled, keeping the old result and progress (cancel wins); otherwise
-- succeeded with %(result)s (JSON text or NULL) and progress 1.0.
-- Params: %(id)s, %(worker_id)s, %(result)s. No row = lease lost.
update cairnq_tasks
set status = case when cancel_requested_at_ms is null then 'succeeded' else 'canceled' end,
    result = case when cancel_requested_at_ms is null then %(result)s::jsonb else result end,
    progress = case when cancel_requested_at_ms is null then 1.0 else progress end,
    lease_until_ms = null,
    completed_at_ms = (extract(epoch from now()) * 1000)::bigint,
    updated_at_ms = (extract(epoch from now()) * 1000)::bigint
where id = %(id)s::text
    and status = 'running'
    and worker_id = %(worker_id)s::text
    and lease_until_ms > (extract(epoch from now()) * 1000)::bigint
returning *
