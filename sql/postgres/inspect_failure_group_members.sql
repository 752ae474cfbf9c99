-- inspect_failure_group_members: the failed tasks of one name and error type
-- completed at or after %(since_ms)s (raised by the caller to the edge of the newest N
-- failures), newest first,
-- with the first line of their message, digits folded to "#" (the caller masks it
-- and keeps the tasks of one group). Params: %(name)s, %(error_type)s, %(since_ms)s.
select id, queue, completed_at_ms,
       translate(left(split_part(m, E'\n', 1), 300), '0123456789', '##########')
           as first_line
from (
    select id, queue, name, completed_at_ms,
           coalesce(error ->> 'type', '') as error_type,
           coalesce(error ->> 'message', '') as m
    from cairnq_tasks
    where status = 'failed' and completed_at_ms >= %(since_ms)s
) as recent
where name = %(name)s::text and error_type = %(error_type)s::text
order by completed_at_ms desc, id desc;
