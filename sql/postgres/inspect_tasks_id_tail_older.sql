-- inspect_tasks_id_tail_older: tasks whose id contains %(text)s (the random end of an id
-- that someone copied, which a prefix range cannot find), newest first, strictly older than a cursor.
-- Only the %(scan_limit)s ids next to the cursor are looked at, read from the primary
-- key alone; the few that match are then read in full. One page never reads more
-- than %(scan_limit)s index entries.
-- Params: %(text)s; %(status)s, %(queue)s, %(name)s (NULL = any); %(before_id)s (the cursor,
-- NULL = from the newest); %(scan_limit)s; %(limit)s.
-- Run unprepared (engine/store/_pg_statements.py PLANNED_WITH_VALUES): the server
-- plans each call with its values, so a filter given one seeks its index and one
-- left NULL drops out of the plan.
select id, name, queue, status, attempt, max_attempts, priority, worker_id, lease_until_ms,
       run_at_ms, cancel_requested_at_ms, progress, substr(message, 1, 200) as message,
       created_at_ms, updated_at_ms, completed_at_ms
from cairnq_tasks
where id in (
    select window_ids.id
    from (
        select id from cairnq_tasks
        where (%(before_id)s::text is null or id < %(before_id)s::text)
        order by id desc
        limit %(scan_limit)s
    ) as window_ids
    where strpos(id, %(text)s::text) > 0
)
  and (%(status)s::text is null or status = %(status)s::text)
  and (%(queue)s::text is null or queue = %(queue)s::text)
  and (%(name)s::text is null or name = %(name)s::text)
order by id desc
limit %(limit)s;
