-- claim: lease up to :limit due queued tasks from any of :queues, with any of
-- :names (NULL = every name), to :worker_id until :lease_until_ms (§4.13).
-- The candidates are chosen in claim order (highest priority, then earliest
-- due, then id) in the CTE; the UPDATE leases them. Rows come back in no
-- particular order (the store sorts them).
-- Params: :queues (JSON array), :names (JSON array or NULL), :worker_id, :limit, :now_ms, :lease_until_ms
with picked(id) as (
    select id
    from cairnq_tasks
    where queue in (select q.value from json_each(:queues) as q)
      and status = 'queued'
      and :now_ms >= run_at_ms
      and (name in (select n.value from json_each(:names) as n) or :names is null)
    order by priority desc, run_at_ms asc, id asc
    limit :limit
)
update cairnq_tasks
set (status, worker_id, lease_until_ms, updated_at_ms) =
        ('running', :worker_id, :lease_until_ms, :now_ms),
    attempt = attempt + 1
where id in picked
returning *;
