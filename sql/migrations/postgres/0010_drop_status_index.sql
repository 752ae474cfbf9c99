-- 0010_drop_status_index.sql (Postgres): the bare status index served nothing the
-- later indexes do not, and cost every status write.
drop index if exists cairnq_tasks_status_idx;

update cairnq_meta set value = '10' where key = 'schema_version';
