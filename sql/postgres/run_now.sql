-- run_now: an operator makes a queued task due now (the server's clock). A task due
-- earlier keeps its time (it must not lose its place in the claim order); a running
-- or finished task matches nothing (the caller says why). Params: %(id)s
update cairnq_tasks
set run_at_ms = least(run_at_ms, (extract(epoch from now()) * 1000)::bigint),
    updated_at_ms = (extract(epoch from now()) * 1000)::bigint
where id = %(id)s::text and status = 'queued'
returning *
