-- recover_leases: settle every running row whose lease expired, across all queues
-- and names. Cancel requested -> canceled; attempts left -> queued, due now, no
-- backoff, previous error kept; otherwise -> failed with %(lease_expired_error)s
-- (JSON text). Rows are picked FOR UPDATE SKIP LOCKED; the clock is read once.
-- Returns the rows.
with clock as (
    select (extract(epoch from clock_timestamp()) * 1000)::bigint as now_ms
)
update cairnq_tasks as t
set status = case
        when t.cancel_requested_at_ms is not null then 'canceled'
        when t.attempt < t.max_attempts then 'queued'
        else 'failed'
    end,
    worker_id = case
        when t.cancel_requested_at_ms is null and t.attempt < t.max_attempts then null
        else t.worker_id
    end,
    run_at_ms = case
        when t.cancel_requested_at_ms is null and t.attempt < t.max_attempts then clock.now_ms
        else t.run_at_ms
    end,
    error = case
        when t.cancel_requested_at_ms is null and t.attempt >= t.max_attempts
            then %(lease_expired_error)s::jsonb
        else t.error
    end,
    completed_at_ms = case
        when t.cancel_requested_at_ms is null and t.attempt < t.max_attempts
            then t.completed_at_ms
        else clock.now_ms
    end,
    progress = case
        when t.cancel_requested_at_ms is null and t.attempt < t.max_attempts then null
        else t.progress
    end,
    message = case
        when t.cancel_requested_at_ms is null and t.attempt < t.max_attempts then null
        else t.message
    end,
    lease_until_ms = null,
    updated_at_ms = clock.now_ms
from clock
where t.id in (
    select id
    from cairnq_tasks
    where status = 'running'
        and lease_until_ms is not null
        and lease_until_ms <= (select now_ms from clock)
    for update skip locked
)
returning t.*
