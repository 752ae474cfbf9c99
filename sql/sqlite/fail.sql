-- fail: record :error on an owned task (§4.18). Cancel requested -> canceled;
-- retryable with attempts left -> queued again after :delay_ms (worker, progress
-- and message cleared); otherwise -> failed. The CTE names the outcome once.
-- Params: :id, :worker_id, :error (JSON text), :retryable (0/1), :delay_ms, :now_ms
with verdict(id, fate) as (
    select id,
           iif(cancel_requested_at_ms is not null, 'canceled',
               iif(:retryable and attempt < max_attempts, 'queued', 'failed'))
    from cairnq_tasks
    where id = :id and (status, worker_id) = ('running', :worker_id)
      and :now_ms < lease_until_ms
)
update cairnq_tasks as t
set status = v.fate,
    error = :error,
    worker_id = iif(v.fate = 'queued', null, t.worker_id),
    run_at_ms = iif(v.fate = 'queued', :now_ms + :delay_ms, t.run_at_ms),
    completed_at_ms = iif(v.fate = 'queued', null, :now_ms),
    progress = iif(v.fate = 'queued', null, t.progress),
    message = iif(v.fate = 'queued', null, t.message),
    (lease_until_ms, updated_at_ms) = (null, :now_ms)
from verdict as v
where t.id = v.id
returning *;
