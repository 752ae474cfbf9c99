-- retry: put a failed or canceled task back in the queue, due now (§4.9).
-- The result is kept; attempt restarts at 0 only when :reset_attempt is 1.
-- Params: :id, :reset_attempt (0/1), :now_ms
update cairnq_tasks
set (status, run_at_ms, updated_at_ms) = ('queued', :now_ms, :now_ms),
    attempt = iif(:reset_attempt, 0, attempt),
    (error, worker_id, lease_until_ms, cancel_requested_at_ms) = (null, null, null, null),
    (completed_at_ms, progress, message) = (null, null, null)
where status in ('failed', 'canceled') and id = :id
returning *;
