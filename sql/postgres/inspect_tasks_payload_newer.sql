-- inspect_tasks_payload_newer: a page of tasks whose payload text contains %(text)s,
-- oldest first, just newer than a cursor (the caller reverses it). A text match has no index, so only
-- the %(scan_limit)s tasks next to the cursor are searched: one page never reads more
-- than that many rows.
-- Params: %(text)s; %(status)s, %(queue)s, %(name)s (NULL = any); %(after_id)s (the cursor, NULL = from the oldest);
-- %(scan_limit)s; %(limit)s.
-- Run unprepared (engine/store/_pg_statements.py PLANNED_WITH_VALUES): the server
-- plans each call with its values, so a filter given one seeks its index and one
-- left NULL drops out of the plan.
select t.id, t.name, t.queue, t.status, t.attempt, t.max_attempts, t.priority, t.worker_id,
       t.lease_until_ms, t.run_at_ms, t.cancel_requested_at_ms, t.progress,
       substr(t.message, 1, 200) as message, t.created_at_ms, t.updated_at_ms, t.completed_at_ms
from (
    select * from cairnq_tasks
    where (%(after_id)s::text is null or id > %(after_id)s::text)
    order by id asc
    limit %(scan_limit)s
) as t
where strpos(t.payload::text, %(text)s::text) > 0
  and (%(status)s::text is null or t.status = %(status)s::text)
  and (%(queue)s::text is null or t.queue = %(queue)s::text)
  and (%(name)s::text is null or t.name = %(name)s::text)
order by t.id asc
limit %(limit)s;
