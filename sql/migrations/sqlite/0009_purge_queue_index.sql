-- 0009_purge_queue_index: purge filtered by queue, terminal rows only.
CREATE INDEX IF NOT EXISTS cairnq_tasks_queue_completed_idx
    ON cairnq_tasks (queue, completed_at_ms)
    WHERE status IN ('succeeded', 'failed', 'canceled');
UPDATE cairnq_meta SET value = '9' WHERE key = 'schema_version';
