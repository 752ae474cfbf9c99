-- inspect_sorted_updated_newer: tasks in order of last update (updated_at_ms) (asc), strictly after
-- the cursor (:cursor_ms, :cursor_id), with that time within [:from_ms, :to_ms).
-- No protocol index orders by this column, so the sort covers a window: the newest
-- :scan_limit tasks matching the filters, found by walking the primary key from
-- the newest id (the filters are written "(col = :p or :p is null)", SQLite's shape
-- that keeps the walk there). The sort never holds more than the window.
-- Params: :status, :queue, :name (NULL = any); :from_ms, :to_ms; :cursor_ms,
-- :cursor_id (the first page passes a cursor past every row); :scan_limit; :limit.
-- Run unprepared (engine/store/_pg_statements.py PLANNED_WITH_VALUES): the server
-- plans each call with its values, so a filter given one seeks its index and one
-- left NULL drops out of the plan.
select t.id, t.name, t.queue, t.status, t.attempt, t.max_attempts, t.priority, t.worker_id,
       t.lease_until_ms, t.run_at_ms, t.cancel_requested_at_ms, t.progress,
       substr(t.message, 1, 200) as message, t.created_at_ms, t.updated_at_ms, t.completed_at_ms
from (
    select * from cairnq_tasks
    where (status = :status::text or :status::text is null)
      and (queue = :queue::text or :queue::text is null)
      and (name = :name::text or :name::text is null)
    order by id desc
    limit :scan_limit
) as t
where t.updated_at_ms >= :from_ms::bigint and t.updated_at_ms < :to_ms::bigint
  and t.updated_at_ms >= :cursor_ms::bigint
  and (t.updated_at_ms > :cursor_ms::bigint or t.id > :cursor_id::text)
order by t.updated_at_ms asc, t.id asc
limit :limit;
