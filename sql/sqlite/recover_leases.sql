-- recover_leases: settle every running task whose lease has expired (§4.12):
-- cancel requested -> canceled; attempts left -> queued again, due now, keeping
-- its previous error; otherwise -> failed with the LeaseExpired envelope.
-- The CTE reads the partial lease index (its predicate spelled out) and names
-- each row's outcome once. Params: :lease_expired_error (JSON text), :now_ms
with expired(id, fate) as (
    select id,
           iif(cancel_requested_at_ms is not null, 'canceled',
               iif(attempt < max_attempts, 'queued', 'failed'))
    from cairnq_tasks
    where status = 'running' and lease_until_ms is not null -- the partial index's predicate
      and lease_until_ms <= :now_ms
)
update cairnq_tasks as t
set status = e.fate,
    error = iif(e.fate = 'failed', :lease_expired_error, t.error),
    worker_id = iif(e.fate = 'queued', null, t.worker_id),
    run_at_ms = iif(e.fate = 'queued', :now_ms, t.run_at_ms),
    completed_at_ms = iif(e.fate = 'queued', t.completed_at_ms, :now_ms),
    progress = iif(e.fate = 'queued', null, t.progress),
    message = iif(e.fate = 'queued', null, t.message),
    (lease_until_ms, updated_at_ms) = (null, :now_ms)
from expired as e
where t.id = e.id
returning *;
