-- fail: record %(error)s (JSON text) on an owned task. Cancel requested ->
-- canceled; %(retryable)s with attempts left -> queued again after %(delay_ms)s, the
-- attempt's worker, progress and message cleared; otherwise failed.
-- Params: %(id)s, %(worker_id)s, %(error)s, %(retryable)s (boolean), %(delay_ms)s.
-- No row = lease lost.
update cairnq_tasks
set status = case
        when cancel_requested_at_ms is not null then 'canceled'
        when %(retryable)s::boolean and attempt < max_attempts then 'queued'
        else 'failed'
    end,
    error = %(error)s::jsonb,
    worker_id = case
        when cancel_requested_at_ms is null and %(retryable)s::boolean and attempt < max_attempts
            then null
        else worker_id
    end,
    run_at_ms = case
        when cancel_requested_at_ms is null and %(retryable)s::boolean and attempt < max_attempts
            then (extract(epoch from now()) * 1000)::bigint + %(delay_ms)s::bigint
        else run_at_ms
    end,
    completed_at_ms = case
        when cancel_requested_at_ms is null and %(retryable)s::boolean and attempt < max_attempts
            then null
        else (extract(epoch from now()) * 1000)::bigint
    end,
    progress = case
        when cancel_requested_at_ms is null and %(retryable)s::boolean and attempt < max_attempts
            then null
        else progress
    end,
    message = case
        when cancel_requested_at_ms is null and %(retryable)s::boolean and attempt < max_attempts
            then null
        else message
    end,
    lease_until_ms = null,
    updated_at_ms = (extract(epoch from now()) * 1000)::bigint
where id = %(id)s::text
    and status = 'running'
    and worker_id = %(worker_id)s::text
    and lease_until_ms > (extract(epoch from now()) * 1000)::bigint
returning *
