-- inspect_metrics_throughput: terminal tasks per queue, name, status and time bucket
-- (completed_at_ms / %(bucket_ms)s) over the newest %(cap)s completions at or after
-- %(since_ms)s (a walk of the completion index, newest first; the cap bounds the work).
-- Params: %(since_ms)s, %(cap)s, %(bucket_ms)s.
select queue, name, status, completed_at_ms / %(bucket_ms)s::bigint as bucket, count(*) as n
from (
    select queue, name, status, completed_at_ms
    from cairnq_tasks
    where completed_at_ms >= %(since_ms)s
    order by completed_at_ms desc
    limit %(cap)s
) as recent
group by queue, name, status, bucket;
