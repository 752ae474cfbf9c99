-- delay: an operator pushes a queued task back by :delay_ms, counted from its due
-- time or from now if it is already due. A running or finished task matches nothing
-- (the caller says why). Params: :id, :delay_ms, :now_ms
update cairnq_tasks
set run_at_ms = max(run_at_ms, :now_ms) + :delay_ms,
    updated_at_ms = :now_ms
where status = 'queued' and id = :id
returning *;
