-- list: tasks matching every given filter (NULL = unfiltered), newest first.
-- Params: %(status)s, %(queue)s, %(name)s, %(root_id)s, %(correlation_id)s, %(limit)s, %(offset)s.
-- Run unprepared (engine/store/_pg_statements.py PLANNED_WITH_VALUES): the server
-- plans each call with its values, so a filter given one seeks its index and one
-- left NULL drops out of the plan.
select *
from cairnq_tasks
where (%(status)s::text is null or status = %(status)s::text)
    and (%(queue)s::text is null or queue = %(queue)s::text)
    and (%(name)s::text is null or name = %(name)s::text)
    and (%(root_id)s::text is null or root_id = %(root_id)s::text)
    and (%(correlation_id)s::text is null or correlation_id = %(correlation_id)s::text)
order by created_at_ms desc, id desc
limit %(limit)s::bigint offset %(offset)s::bigint
