-- inspect_errors_failed_newer: failed tasks whose error type or message contains
-- %(text)s (lower-cased by the caller; matched against the lower-cased envelope),
-- in completion order (asc), strictly newer than the cursor (%(cursor_ms)s, %(cursor_id)s).
-- The (status, completed_at_ms) index bounds the walk: only failures completed at
-- or after %(floor_ms)s (the window of the newest N failures) are read, and the walk
-- stops at %(limit)s matches, so a page never reads more than the window.
-- (:raw_text, SQLite's cheap look at the raw JSON, is not used: rendering jsonb as
-- text costs more here than reading the two fields.)
-- Params: %(text)s; %(floor_ms)s (the window's edge); %(cursor_ms)s, %(cursor_id)s
-- (the first page passes a cursor before every row); %(queue)s, %(name)s (NULL = any); %(limit)s.
-- Run unprepared (engine/store/_pg_statements.py PLANNED_WITH_VALUES): the server
-- plans each call with its values, so a filter given one seeks its index and one
-- left NULL drops out of the plan.
select id, name, queue, status, attempt, max_attempts, priority, worker_id, lease_until_ms,
       run_at_ms, cancel_requested_at_ms, progress, substr(message, 1, 200) as message,
       created_at_ms, updated_at_ms, completed_at_ms,
       error ->> 'type' as error_type,
       left(error ->> 'message', 2000) as error_message
from cairnq_tasks
where status = 'failed'
  and completed_at_ms >= %(floor_ms)s
  and completed_at_ms >= %(cursor_ms)s
  and (completed_at_ms > %(cursor_ms)s or id > %(cursor_id)s::text)
  and (%(queue)s::text is null or queue = %(queue)s::text)
  and (%(name)s::text is null or name = %(name)s::text)
  and strpos(lower(coalesce(error ->> 'type', '') || E'\n' || coalesce(error ->> 'message', '')),
             %(text)s::text) > 0
order by completed_at_ms asc, id asc
limit %(limit)s;
