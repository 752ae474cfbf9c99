-- inspect_count_tasks_by_key: how many tasks have a key starting with a prefix (and
-- match the filters), counting at most %(cap)s rows.
-- Params: %(key_from)s, %(key_to)s (the prefix as a range; %(key_to)s NULL = open); %(status)s,
-- %(queue)s, %(name)s (NULL = any); %(cap)s.
-- Run unprepared (engine/store/_pg_statements.py PLANNED_WITH_VALUES): the server
-- plans each call with its values, so a filter given one seeks its index and one
-- left NULL drops out of the plan.
select count(*) as n
from (
    select 1
    from cairnq_task_keys k
    join cairnq_tasks t on t.id = k.task_id
    where k.key >= %(key_from)s
      and (%(key_to)s::text is null or k.key < %(key_to)s::text)
      and (%(status)s::text is null or t.status = %(status)s::text)
      and (%(queue)s::text is null or t.queue = %(queue)s::text)
      and (%(name)s::text is null or t.name = %(name)s::text)
    limit %(cap)s
) as capped;
