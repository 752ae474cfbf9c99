-- inspect_count_purgeable: how many tasks a purge with these filters would delete,
-- counting at most %(cap)s rows; the same candidates as purge (terminal, completed
-- strictly before %(before_ms)s) read through the same indexes.
-- Params: %(before_ms)s; %(queue)s, %(status)s, %(name)s (NULL = any); %(cap)s.
-- Run unprepared (engine/store/_pg_statements.py PLANNED_WITH_VALUES): the server
-- plans each call with its values, so a filter given one seeks its index and one
-- left NULL drops out of the plan.
select count(*) as n
from (
    select 1 from cairnq_tasks
    where status in ('succeeded', 'failed', 'canceled')
      and completed_at_ms is not null
      and completed_at_ms < %(before_ms)s
      and (%(queue)s::text is null or queue = %(queue)s::text)
      and (%(status)s::text is null or status = %(status)s::text)
      and (%(name)s::text is null or name = %(name)s::text)
    limit %(cap)s
) as capped;
