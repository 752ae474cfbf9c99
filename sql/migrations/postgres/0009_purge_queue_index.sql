-- 0009_purge_queue_index.sql (Postgres): purge restricted to one queue reads
-- only terminal rows, so the index holds only those.
create index if not exists cairnq_tasks_queue_completed_idx
    on cairnq_tasks (queue, completed_at_ms)
    where status in ('succeeded', 'failed', 'canceled');

update cairnq_meta set value = '9' where key = 'schema_version';
