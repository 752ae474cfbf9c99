-- 0006_claim_name_index.sql (Postgres): the per-name claim index in its first
-- shape; 0008 rebuilds it ordered by due time.
create index if not exists cairnq_tasks_claim_name_idx
    on cairnq_tasks (queue, status, name, priority desc, created_at_ms);

update cairnq_meta set value = '6' where key = 'schema_version';
