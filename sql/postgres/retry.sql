-- retry: put a failed or canceled task back in its queue, due now, with the
-- attempt's traces cleared (result is kept). Params: %(id)s, %(reset_attempt)s
-- (boolean: start counting attempts from zero again).
update cairnq_tasks
set status = 'queued',
    error = null,
    worker_id = null,
    lease_until_ms = null,
    cancel_requested_at_ms = null,
    completed_at_ms = null,
    progress = null,
    message = null,
    run_at_ms = (extract(epoch from now()) * 1000)::bigint,
    attempt = case when %(reset_attempt)s::boolean then 0 else attempt end,
    updated_at_ms = (extract(epoch from now()) * 1000)::bigint
where id = %(id)s::text and status in ('failed', 'canceled')
returning *
