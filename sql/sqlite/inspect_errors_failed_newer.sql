-- inspect_errors_failed_newer: failed tasks whose error type or message contains
-- :text (lower-cased by the caller; matched against the lower-cased envelope),
-- in completion order (asc), strictly newer than the cursor (:cursor_ms, :cursor_id).
-- The (status, completed_at_ms) index bounds the walk: only failures completed at
-- or after :floor_ms (the window of the newest N failures) are read, and the walk
-- stops at :limit matches, so a page never reads more than the window.
-- :raw_text is :text when the raw JSON must hold it as is (else NULL): a cheap
-- look at the column before decoding the envelope, which most rows then skip.
-- Params: :text, :raw_text; :floor_ms (the window's edge); :cursor_ms, :cursor_id
-- (the first page passes a cursor before every row); :queue, :name (NULL = any); :limit.
select id, name, queue, status, attempt, max_attempts, priority, worker_id, lease_until_ms,
       run_at_ms, cancel_requested_at_ms, progress, substr(message, 1, 200) as message,
       created_at_ms, updated_at_ms, completed_at_ms,
       json_extract(error, '$.type') as error_type,
       substr(json_extract(error, '$.message'), 1, 2000) as error_message
from cairnq_tasks
where status = 'failed'
  and completed_at_ms >= :floor_ms
  and completed_at_ms >= :cursor_ms
  and (completed_at_ms > :cursor_ms or id > :cursor_id)
  and (:queue is null or queue = :queue)
  and (:name is null or name = :name)
  and (:raw_text is null or instr(lower(error), :raw_text) > 0)
  and instr(lower(coalesce(json_extract(error, '$.type'), '') || char(10)
                  || coalesce(json_extract(error, '$.message'), '')), :text) > 0
order by completed_at_ms asc, id asc
limit :limit;
