-- inspect_failure_group_members: the failed tasks of one name and error type
-- completed at or after :since_ms, within the newest :cap failures, newest first,
-- with the first line of their message (the caller masks it and keeps the tasks of
-- one group). Params: :name, :error_type, :since_ms, :cap.
select id, queue, completed_at_ms, left(split_part(m, E'\n', 1), 300) as first_line
from (
    select id, queue, name, completed_at_ms,
           coalesce(error ->> 'type', '') as error_type,
           coalesce(error ->> 'message', '') as m
    from cairnq_tasks
    where status = 'failed' and completed_at_ms >= :since_ms
    order by completed_at_ms desc
    limit :cap
) as recent
where name = :name::text and error_type = :error_type::text
order by completed_at_ms desc, id desc;
