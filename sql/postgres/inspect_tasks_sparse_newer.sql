-- inspect_tasks_sparse_newer: a page of tasks, oldest first, just newer than a cursor (the caller reverses it),
-- for filters that match few rows (the caller knows from inspect_count_tasks). The
-- filters given a value are planned as equalities so an index on them (claim, claim_name,
-- name, status_completed) finds the matching ids, the planner sorts those few by
-- id, and only the page's rows are then read in full.
-- Params: %(status)s, %(queue)s, %(name)s (NULL = any); %(id_from)s, %(id_to)s (an id-prefix
-- range, NULL = open); %(after_id)s (the cursor, NULL = from the oldest); %(limit)s.
-- Run unprepared (engine/store/_pg_statements.py PLANNED_WITH_VALUES): the server
-- plans each call with its values, so a filter given one seeks its index and one
-- left NULL drops out of the plan.
select id, name, queue, status, attempt, max_attempts, priority, worker_id, lease_until_ms,
       run_at_ms, cancel_requested_at_ms, progress, substr(message, 1, 200) as message,
       created_at_ms, updated_at_ms, completed_at_ms
from cairnq_tasks
where id in (
    select id from cairnq_tasks
    where (%(status)s::text is null or status = %(status)s::text)
      and (%(queue)s::text is null or queue = %(queue)s::text)
      and (%(name)s::text is null or name = %(name)s::text)
      and (%(id_from)s::text is null or id >= %(id_from)s::text)
      and (%(id_to)s::text is null or id < %(id_to)s::text)
      and (%(after_id)s::text is null or id > %(after_id)s::text)
    order by id asc
    limit %(limit)s
)
order by id asc;
