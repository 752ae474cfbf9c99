-- heartbeat: renew one owned lease to now + :lease_ms. Ownership = running, held
-- by :worker_id, lease not yet expired; no row returned = lease lost.
-- Params: :id, :worker_id, :lease_ms. Returns the row (cancel flag included).
update cairnq_tasks
set lease_until_ms = (extract(epoch from now()) * 1000)::bigint + :lease_ms::bigint,
    updated_at_ms = (extract(epoch from now()) * 1000)::bigint
where id = :id::text
    and status = 'running'
    and worker_id = :worker_id::text
    and lease_until_ms > (extract(epoch from now()) * 1000)::bigint
returning *
