-- inspect_errors_failed_older: failed tasks whose error type or message contains
-- :text (lower-cased by the caller; matched against the lower-cased envelope),
-- in completion order (desc), strictly older than the cursor (:cursor_ms, :cursor_id).
-- The (status, completed_at_ms) index bounds the walk: only failures completed at
-- or after :floor_ms (the window of the newest N failures) are read, and the walk
-- stops at :limit matches, so a page never reads more than the window.
-- (:raw_text, SQLite's cheap look at the raw JSON, is not used: rendering jsonb as
-- text costs more here than reading the two fields.)
-- Params: :text; :floor_ms (the window's edge); :cursor_ms, :cursor_id
-- (the first page passes a cursor past every row); :queue, :name (NULL = any); :limit.
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
  and completed_at_ms >= :floor_ms
  and completed_at_ms <= :cursor_ms
  and (completed_at_ms < :cursor_ms or id < :cursor_id::text)
  and (:queue::text is null or queue = :queue::text)
  and (:name::text is null or name = :name::text)
  and strpos(lower(coalesce(error ->> 'type', '') || E'\n' || coalesce(error ->> 'message', '')),
             :text::text) > 0
order by completed_at_ms desc, id desc
limit :limit;
