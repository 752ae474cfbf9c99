-- fail: record :error on an owned task (§4.18). Cancel requested -> canceled;
-- retryable with attempts left -> queued again after :delay_ms (worker, progress
-- and message cleared); otherwise -> failed.
-- Params: :id, :worker_id, :error (JSON text), :retryable (0/1), :delay_ms, :now_ms
update cairnq_tasks set
    status = case
        when cancel_requested_at_ms is not null then 'canceled'
        when :retryable and attempt < max_attempts then 'queued'
        else 'failed'
    end,
    error = :error,
    worker_id = case
        when cancel_requested_at_ms is null and :retryable and attempt < max_attempts then null
        else worker_id
    end,
    run_at_ms = case
        when cancel_requested_at_ms is null and :retryable and attempt < max_attempts
            then :now_ms + :delay_ms
        else run_at_ms
    end,
    completed_at_ms = case
        when cancel_requested_at_ms is null and :retryable and attempt < max_attempts then null
        else :now_ms
    end,
    progress = case
        when cancel_requested_at_ms is null and :retryable and attempt < max_attempts then null
        else progress
    end,
    message = case
        when cancel_requested_at_ms is null and :retryable and attempt < max_attempts then null
        else message
    end,
    lease_until_ms = null,
    updated_at_ms = :now_ms
where id = :id
  and status = 'running'
  and worker_id = :worker_id
  and lease_until_ms > :now_ms
returning *;
