-- recover_leases: settle every running task whose lease has expired (§4.12):
-- cancel requested -> canceled; attempts left -> queued again, due now, keeping
-- its previous error; otherwise -> failed with the LeaseExpired envelope.
-- Params: :lease_expired_error (JSON text), :now_ms
update cairnq_tasks set
    status = case
        when cancel_requested_at_ms is not null then 'canceled'
        when attempt < max_attempts then 'queued'
        else 'failed'
    end,
    worker_id = case
        when cancel_requested_at_ms is null and attempt < max_attempts then null
        else worker_id
    end,
    run_at_ms = case
        when cancel_requested_at_ms is null and attempt < max_attempts then :now_ms
        else run_at_ms
    end,
    error = case
        when cancel_requested_at_ms is null and attempt >= max_attempts
            then :lease_expired_error
        else error
    end,
    completed_at_ms = case
        when cancel_requested_at_ms is null and attempt < max_attempts then completed_at_ms
        else :now_ms
    end,
    progress = case
        when cancel_requested_at_ms is null and attempt < max_attempts then null
        else progress
    end,
    message = case
        when cancel_requested_at_ms is null and attempt < max_attempts then null
        else message
    end,
    lease_until_ms = null,
    updated_at_ms = :now_ms
where status = 'running'
  and lease_until_ms is not null
  and lease_until_ms <= :now_ms
returning *;
