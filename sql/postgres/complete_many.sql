-- complete_many: complete (same rule per row) for several owned tasks that
-- return no result, in one statement: a cancel request wins and keeps the old
-- result and progress; otherwise succeeded with a NULL result and progress 1.0.
-- Each row is checked on its own; an id missing from the result lost its lease.
-- Params: %(ids)s (text array), %(worker_id)s. Returns the ids settled.
update cairnq_tasks
set status = case when cancel_requested_at_ms is null then 'succeeded' else 'canceled' end,
    result = case when cancel_requested_at_ms is null then null else result end,
    progress = case when cancel_requested_at_ms is null then 1.0 else progress end,
    lease_until_ms = null,
    completed_at_ms = (extract(epoch from now()) * 1000)::bigint,
    updated_at_ms = (extract(epoch from now()) * 1000)::bigint
where id = any(%(ids)s::text[])
    and status = 'running'
    and worker_id = %(worker_id)s::text
    and lease_until_ms > (extract(epoch from now()) * 1000)::bigint
returning id
