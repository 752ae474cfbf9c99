-- 0006_claim_name_index: claims filtered by one task name (first shape; see 0008).
CREATE INDEX IF NOT EXISTS cairnq_tasks_claim_name_idx
    ON cairnq_tasks (queue, status, name, priority DESC, created_at_ms);
UPDATE cairnq_meta SET value = '6' WHERE key = 'schema_version';
