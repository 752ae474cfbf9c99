-- inspect_count_tasks: how many tasks match the filters, counting at most %(cap)s rows
-- (a result equal to %(cap)s means "at least"), so a refresh never scans a big table.
-- Each filter combination reads a covering index: claim_idx (queue, status),
-- claim_name_idx (queue, status, name), name_idx, status_completed_idx.
-- Params: %(status)s, %(queue)s, %(name)s (NULL = any); %(id_from)s, %(id_to)s (an id-prefix range,
-- NULL = open); %(cap)s.
-- Run unprepared (engine/store/_pg_statements.py PLANNED_WITH_VALUES): the server
-- plans each call with its values, so a filter given one seeks its index and one
-- left NULL drops out of the plan.
select count(*) as n
from (
    select 1 from cairnq_tasks
    where (%(status)s::text is null or status = %(status)s::text)
      and (%(queue)s::text is null or queue = %(queue)s::text)
      and (%(name)s::text is null or name = %(name)s::text)
      and (%(id_from)s::text is null or id >= %(id_from)s::text)
      and (%(id_to)s::text is null or id < %(id_to)s::text)
    limit %(cap)s
) as capped;
