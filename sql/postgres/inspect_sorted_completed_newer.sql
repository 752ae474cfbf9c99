-- inspect_sorted_completed_newer: finished tasks in completion order (asc), strictly
-- after the cursor (%(cursor_ms)s, %(cursor_id)s), completed within [%(from_ms)s, %(to_ms)s).
-- A completion index serves each filter: (status, completed_at_ms) for a status,
-- the partial (queue, completed_at_ms) for a queue (its three-status predicate is
-- spelled out), (completed_at_ms) otherwise; the walk stops at %(limit)s rows.
-- Params: %(status)s, %(queue)s, %(name)s (NULL = any); %(from_ms)s, %(to_ms)s; %(cursor_ms)s,
-- %(cursor_id)s (the first page passes a cursor past every row); %(limit)s.
-- Run unprepared (engine/store/_pg_statements.py PLANNED_WITH_VALUES): the server
-- plans each call with its values, so a filter given one seeks its index and one
-- left NULL drops out of the plan.
select id, name, queue, status, attempt, max_attempts, priority, worker_id, lease_until_ms,
       run_at_ms, cancel_requested_at_ms, progress, substr(message, 1, 200) as message,
       created_at_ms, updated_at_ms, completed_at_ms
from cairnq_tasks
where status in ('succeeded', 'failed', 'canceled')
  and (%(status)s::text is null or status = %(status)s::text)
  and (%(queue)s::text is null or queue = %(queue)s::text)
  and (%(name)s::text is null or name = %(name)s::text)
  and completed_at_ms >= %(from_ms)s::bigint and completed_at_ms < %(to_ms)s::bigint
  and completed_at_ms >= %(cursor_ms)s::bigint
  and (completed_at_ms > %(cursor_ms)s::bigint or id > %(cursor_id)s::text)
order by completed_at_ms asc, id asc
limit %(limit)s;
