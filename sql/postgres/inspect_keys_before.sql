-- inspect_keys_before: a page of the key table in reverse key order, before a cursor (the caller reverses it), optionally
-- limited to a prefix: a range seek on cairnq_task_keys' primary key, each key
-- joined to the task it points at (its status, name and queue).
-- Params: %(key_from)s, %(key_to)s (the prefix as a range, NULL = open); %(before_key)s (the cursor);
-- %(limit)s.
-- Run unprepared (engine/store/_pg_statements.py PLANNED_WITH_VALUES): the server
-- plans each call with its values, so a filter given one seeks its index and one
-- left NULL drops out of the plan.
select k.key, k.task_id, t.status, t.name, t.queue, k.created_at_ms, k.updated_at_ms
from cairnq_task_keys k
left join cairnq_tasks t on t.id = k.task_id
where (%(key_from)s::text is null or k.key >= %(key_from)s::text)
  and (%(key_to)s::text is null or k.key < %(key_to)s::text)
  and (%(before_key)s::text is null or k.key < %(before_key)s::text)
order by k.key desc
limit %(limit)s;
