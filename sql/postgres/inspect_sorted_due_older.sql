-- inspect_sorted_due_older: tasks in order of due time (run_at_ms) (desc), strictly before
-- the cursor (%(cursor_ms)s, %(cursor_id)s), with that time within [%(from_ms)s, %(to_ms)s).
-- No protocol index orders by this column, so the sort covers a window: the newest
-- %(scan_limit)s tasks matching the filters, found by walking the primary key from
-- the newest id (the filters are written "(col = :p or :p is null)", SQLite's shape
-- that keeps the walk there). The sort never holds more than the window.
-- Params: %(status)s, %(queue)s, %(name)s (NULL = any); %(from_ms)s, %(to_ms)s; %(cursor_ms)s,
-- %(cursor_id)s (the first page passes a cursor past every row); %(scan_limit)s; %(limit)s.
-- Run unprepared (engine/store/_pg_statements.py PLANNED_WITH_VALUES): the server
-- plans each call with its values, so a filter given one seeks its index and one
-- left NULL drops out of the plan.
select t.id, t.name, t.queue, t.status, t.attempt, t.max_attempts, t.priority, t.worker_id,
       t.lease_until_ms, t.run_at_ms, t.cancel_requested_at_ms, t.progress,
       substr(t.message, 1, 200) as message, t.created_at_ms, t.updated_at_ms, t.completed_at_ms
from (
    select * from cairnq_tasks
    where (status = %(status)s::text or %(status)s::text is null)
      and (queue = %(queue)s::text or %(queue)s::text is null)
      and (name = %(name)s::text or %(name)s::text is null)
    order by id desc
    limit %(scan_limit)s
) as t
where t.run_at_ms >= %(from_ms)s::bigint and t.run_at_ms < %(to_ms)s::bigint
  and t.run_at_ms <= %(cursor_ms)s::bigint
  and (t.run_at_ms < %(cursor_ms)s::bigint or t.id < %(cursor_id)s::text)
order by t.run_at_ms desc, t.id desc
limit %(limit)s;
