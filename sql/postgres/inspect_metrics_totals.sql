-- inspect_metrics_totals: exact terminal tasks per status and time bucket
-- (completed_at_ms / :bucket_ms) from :since_ms on, read from the (status,
-- completed_at_ms) index alone (no table row is touched): what a sampled metrics
-- read scales its per-name counts to, and how the engine decides to sample.
-- Params: :since_ms, :bucket_ms.
select status, completed_at_ms / :bucket_ms::bigint as bucket, count(*) as n
from cairnq_tasks
where status in ('succeeded', 'failed', 'canceled') and completed_at_ms >= :since_ms
group by status, bucket;
