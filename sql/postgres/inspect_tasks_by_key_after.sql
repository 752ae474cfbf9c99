-- inspect_tasks_by_key_after: a page of tasks whose key starts with a prefix,
-- in key order, after a cursor. The prefix is a range seek on
-- cairnq_task_keys' primary key walked in order, each key joined to its task by id:
-- one page costs about one page of keys, never a scan of cairnq_tasks.
-- Params: %(key_from)s, %(key_to)s (the prefix as a range; %(key_to)s NULL = open);
-- %(status)s, %(queue)s, %(name)s (NULL = any); %(after_key)s (the cursor, NULL = from the first); %(limit)s.
-- Run unprepared (engine/store/_pg_statements.py PLANNED_WITH_VALUES): the server
-- plans each call with its values, so a filter given one seeks its index and one
-- left NULL drops out of the plan.
select t.id, t.name, t.queue, t.status, t.attempt, t.max_attempts, t.priority, t.worker_id,
       t.lease_until_ms, t.run_at_ms, t.cancel_requested_at_ms, t.progress,
       substr(t.message, 1, 200) as message, t.created_at_ms, t.updated_at_ms, t.completed_at_ms, k.key as key
from cairnq_task_keys k
join cairnq_tasks t on t.id = k.task_id
where k.key >= %(key_from)s
  and (%(key_to)s::text is null or k.key < %(key_to)s::text)
  and (%(status)s::text is null or t.status = %(status)s::text)
  and (%(queue)s::text is null or t.queue = %(queue)s::text)
  and (%(name)s::text is null or t.name = %(name)s::text)
  and (%(after_key)s::text is null or k.key > %(after_key)s::text)
order by k.key asc
limit %(limit)s;
