-- delay: an operator pushes a queued task back by %(delay_ms)s, counted from its due
-- time or from now (the server's clock) if it is already due. A running or finished
-- task matches nothing (the caller says why). Params: %(id)s, %(delay_ms)s
update cairnq_tasks
set run_at_ms = greatest(run_at_ms, (extract(epoch from now()) * 1000)::bigint)
                + %(delay_ms)s::bigint,
    updated_at_ms = (extract(epoch from now()) * 1000)::bigint
where id = %(id)s::text and status = 'queued'
returning *
