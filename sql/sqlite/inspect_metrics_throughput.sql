-- inspect_metrics_throughput: terminal tasks per queue, name, status and time bucket
-- (completed_at_ms / :bucket_ms) over the newest :cap completions at or after
-- :since_ms (a walk of the completion index, newest first; the cap bounds the work).
-- Params: :since_ms, :cap, :bucket_ms.
select queue, name, status, completed_at_ms / :bucket_ms as bucket, count(*) as n
from (
    select queue, name, status, completed_at_ms
    from cairnq_tasks
    where completed_at_ms >= :since_ms
    order by completed_at_ms desc
    limit :cap
)
group by queue, name, status, bucket;
