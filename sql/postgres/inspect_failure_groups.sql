-- inspect_failure_groups: failed tasks completed at or after %(since_ms)s (a range of
-- the (status, completed_at_ms) index; the caller raises %(since_ms)s to the edge of
-- the newest N failures, which bounds the read), counted per
-- name, error type, first line of the message (its digits folded to "#", so
-- messages differing only in numbers count as one row) and time bucket (completed_at_ms /
-- %(bucket_ms)s), with the first and last completion and the newest task id of each.
-- The caller masks volatile parts of the messages and merges what then coincides.
-- Params: %(since_ms)s, %(bucket_ms)s.
select name, error_type,
       translate(left(split_part(m, E'\n', 1), 300), '0123456789', '##########')
           as first_line,
       completed_at_ms / %(bucket_ms)s::bigint as bucket,
       count(*) as n, min(completed_at_ms) as first_ms, max(completed_at_ms) as last_ms,
       max(id) as example_id
from (
    select name, id, completed_at_ms,
           coalesce(error ->> 'type', '') as error_type,
           coalesce(error ->> 'message', '') as m
    from cairnq_tasks
    where status = 'failed' and completed_at_ms >= %(since_ms)s
) as recent
group by name, error_type, first_line, bucket;
