-- run_now: an operator makes a queued task due now. A task due earlier keeps its
-- time (it must not lose its place in the claim order); a running or finished task
-- matches nothing (the caller says why). Params: :id, :now_ms
update cairnq_tasks
set run_at_ms = min(run_at_ms, :now_ms),
    updated_at_ms = :now_ms
where status = 'queued' and id = :id
returning *;
