-- inspect_failure_group_members: the failed tasks of one name and error type
-- completed at or after :since_ms (raised by the caller to the edge of the newest N
-- failures), newest first,
-- with the first line of their message, digits folded to "#" (the caller masks it
-- and keeps the tasks of one group). Params: :name, :error_type, :since_ms.
select id, queue, completed_at_ms,
       replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(
           substr(substr(m, 1, instr(m || char(10), char(10)) - 1), 1, 300),
           '0', '#'), '1', '#'), '2', '#'), '3', '#'), '4', '#'),
           '5', '#'), '6', '#'), '7', '#'), '8', '#'), '9', '#')
       as first_line
from (
    select id, queue, name, completed_at_ms,
           coalesce(json_extract(error, '$.type'), '') as error_type,
           coalesce(json_extract(error, '$.message'), '') as m
    from cairnq_tasks
    where status = 'failed' and completed_at_ms >= :since_ms
)
where name = :name and error_type = :error_type
order by completed_at_ms desc, id desc;
