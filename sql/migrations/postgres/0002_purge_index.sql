-- 0002_purge_index.sql (Postgres): purge finds its oldest terminal rows by
-- completion time.
create index if not exists cairnq_tasks_completed_idx on cairnq_tasks (completed_at_ms);

update cairnq_meta set value = '2' where key = 'schema_version';
