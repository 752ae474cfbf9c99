-- stats: row counts per (queue, status), for one queue or all (NULL).
-- Params: %(queue)s. Zero-filling happens in the application.
-- Run unprepared (engine/store/_pg_statements.py PLANNED_WITH_VALUES): the server
-- plans each call with its values, so a filter given one seeks its index and one
-- left NULL drops out of the plan.
select queue, status, count(*) as count
from cairnq_tasks
where (%(queue)s::text is null or queue = %(queue)s::text)
group by queue, status
order by queue, status
