-- inspect_failure_groups: failed tasks completed at or after :since_ms (a range of
-- the (status, completed_at_ms) index; the caller raises :since_ms to the edge of
-- the newest N failures, which bounds the read), counted per
-- name, error type, first line of the message (its digits folded to "#", so
-- messages differing only in numbers count as one row) and time bucket (completed_at_ms /
-- :bucket_ms), with the first and last completion and the newest task id of each.
-- The caller masks volatile parts of the messages and merges what then coincides.
-- Params: :since_ms, :bucket_ms.
select name, error_type,
       replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(
           substr(substr(m, 1, instr(m || char(10), char(10)) - 1), 1, 300),
           '0', '#'), '1', '#'), '2', '#'), '3', '#'), '4', '#'),
           '5', '#'), '6', '#'), '7', '#'), '8', '#'), '9', '#')
       as first_line,
       completed_at_ms / :bucket_ms as bucket,
       count(*) as n, min(completed_at_ms) as first_ms, max(completed_at_ms) as last_ms,
       max(id) as example_id
from (
    select name, id, completed_at_ms,
           coalesce(json_extract(error, '$.type'), '') as error_type,
           coalesce(json_extract(error, '$.message'), '') as m
    from cairnq_tasks
    where status = 'failed' and completed_at_ms >= :since_ms
)
group by name, error_type, first_line, bucket;
