-- heartbeat: renew one owned lease to now + %(lease_ms)s. Ownership = running, held
-- by %(worker_id)s, lease not yet expired; no row returned = lease lost.
-- Params: %(id)s, %(worker_id)s, %(lease_ms)s. Returns the row (cancel flag included).
update cairnq_tasks
set lease_until_ms = (extract(epoch from now()) * 1000)::bigint + %(lease_ms)s::bigint,
    updated_at_ms = (extract(epoch from now()) * 1000)::bigint
where id = %(id)s::text
    and status = 'running'
    and worker_id = %(worker_id)s::text
    and lease_until_ms > (extract(epoch from now()) * 1000)::bigint
returning *
