-- 0010_drop_status_index: the composite indexes made the status index redundant.
DROP INDEX IF EXISTS cairnq_tasks_status_idx;
UPDATE cairnq_meta SET value = '10' WHERE key = 'schema_version';
