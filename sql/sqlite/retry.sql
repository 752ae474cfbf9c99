-- retry: put a failed or canceled task back in the queue, due now (§4.9).
-- The result is kept; attempt restarts at 0 only when :reset_attempt is 1.
-- Params: :id, :reset_attempt (0/1), :now_ms
update cairnq_tasks set
    status = 'queued',
    error = null,
    worker_id = null,
    lease_until_ms = null,
    cancel_requested_at_ms = null,
    completed_at_ms = null,
    progress = null,
    message = null,
    run_at_ms = :now_ms,
    attempt = case when :reset_attempt then 0 else attempt end,
    updated_at_ms = :now_ms
where id = :id and status in ('failed', 'canceled')
returning *;
