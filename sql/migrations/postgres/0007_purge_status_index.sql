-- 0007_purge_status_index.sql (Postgres): purge filtered by one terminal status.
create index if not exists cairnq_tasks_status_completed_idx
    on cairnq_tasks (status, completed_at_ms);

update cairnq_meta set value = '7' where key = 'schema_version';
