-- claim: claim up to :limit due queued tasks, from any of :queues with any of :names (NULL = any name),
-- highest priority first, then earliest due, then id (§4.13). Rows come back
-- in arbitrary order.
-- Params: :queues (JSON array), :names (JSON array or NULL), :worker_id, :limit, :now_ms, :lease_until_ms
update cairnq_tasks set
    status = 'running',
    worker_id = :worker_id,
    lease_until_ms = :lease_until_ms,
    attempt = attempt + 1,
    updated_at_ms = :now_ms
where id in (
    select id from cairnq_tasks
    where status = 'queued'
      and queue in (select value from json_each(:queues))
      and (:names is null or name in (select value from json_each(:names)))
      and run_at_ms <= :now_ms
    order by priority desc, run_at_ms, id
    limit :limit
)
returning *;
