-- heartbeat_batch: renew every lease in %(ids)s that %(worker_id)s still owns, each row
-- checked on its own; an id missing from the result is no longer held.
-- Params: %(ids)s, %(worker_id)s, %(lease_ms)s. Returns (id, cancel_requested_at_ms).
update cairnq_tasks
set lease_until_ms = (extract(epoch from now()) * 1000)::bigint + %(lease_ms)s::bigint,
    updated_at_ms = (extract(epoch from now()) * 1000)::bigint
where id = any(%(ids)s::text[])
    and status = 'running'
    and worker_id = %(worker_id)s::text
    and lease_until_ms > (extract(epoch from now()) * 1000)::bigint
returning id, cancel_requested_at_ms
