-- inspect_metrics_totals: exact terminal tasks per status and time bucket
-- (completed_at_ms / %(bucket_ms)s) from %(since_ms)s on, read from the (status,
-- completed_at_ms) index alone (no table row is touched): what a sampled metrics
-- read scales its per-name counts to, and how the engine decides to sample.
-- Params: %(since_ms)s, %(bucket_ms)s.
select status, completed_at_ms / %(bucket_ms)s::bigint as bucket, count(*) as n
from cairnq_tasks
where status in ('succeeded', 'failed', 'canceled') and completed_at_ms >= %(since_ms)s
group by status, bucket;
