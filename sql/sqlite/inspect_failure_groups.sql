-- inspect_failure_groups: failed tasks completed at or after :since_ms, at most the
-- newest :cap of them (a walk of the (status, completed_at_ms) index), counted per
-- name, error type, first line of the message and time bucket (completed_at_ms /
-- :bucket_ms), with the first and last completion and the newest task id of each.
-- The caller masks volatile parts of the messages and merges what then coincides.
-- Params: :since_ms, :cap, :bucket_ms.
select name, error_type,
       substr(substr(m, 1, instr(m || char(10), char(10)) - 1), 1, 300) as first_line,
       completed_at_ms / :bucket_ms as bucket,
       count(*) as n, min(completed_at_ms) as first_ms, max(completed_at_ms) as last_ms,
       max(id) as example_id
from (
    select name, id, completed_at_ms,
           coalesce(json_extract(error, '$.type'), '') as error_type,
           coalesce(json_extract(error, '$.message'), '') as m
    from cairnq_tasks
    where status = 'failed' and completed_at_ms >= :since_ms
    order by completed_at_ms desc
    limit :cap
)
group by name, error_type, first_line, bucket;
