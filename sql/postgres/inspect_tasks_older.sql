-- inspect_tasks_older: a page of tasks, newest first, strictly older than a cursor,
-- for filters that match many rows.
-- Ids are ULIDs led by the creation millisecond, so id order is creation order and
-- walking the primary key index costs about page / share-of-matching-rows entries
-- (no index covers created_at_ms; the schema is the protocol's). The filters are
-- written "(col = :p or :p is null)", the twin of SQLite's shape, where the walk is
-- what we want; here the planner, given the values, walks the primary key for
-- filters that match many rows (the caller picks this statement for those).
-- Params: %(status)s, %(queue)s, %(name)s (NULL = any); %(id_from)s, %(id_to)s (an id-prefix
-- range, NULL = open); %(before_id)s (the cursor, NULL = from the newest); %(limit)s.
-- Run unprepared (engine/store/_pg_statements.py PLANNED_WITH_VALUES): the server
-- plans each call with its values, so a filter given one seeks its index and one
-- left NULL drops out of the plan.
select id, name, queue, status, attempt, max_attempts, priority, worker_id, lease_until_ms,
       run_at_ms, cancel_requested_at_ms, progress, substr(message, 1, 200) as message,
       created_at_ms, updated_at_ms, completed_at_ms
from cairnq_tasks
where (status = %(status)s::text or %(status)s::text is null)
  and (queue = %(queue)s::text or %(queue)s::text is null)
  and (name = %(name)s::text or %(name)s::text is null)
  and (%(id_from)s::text is null or id >= %(id_from)s::text)
  and (%(id_to)s::text is null or id < %(id_to)s::text)
  and (%(before_id)s::text is null or id < %(before_id)s::text)
order by id desc
limit %(limit)s;
