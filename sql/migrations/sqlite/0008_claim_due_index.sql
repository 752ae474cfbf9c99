-- 0008_claim_due_index: both claim indexes in their final shape, ordered the
-- way claims pick rows (priority desc, due time, id).
DROP INDEX IF EXISTS cairnq_tasks_claim_idx;
CREATE INDEX cairnq_tasks_claim_idx
    ON cairnq_tasks (queue, status, priority DESC, run_at_ms, id);
DROP INDEX IF EXISTS cairnq_tasks_claim_name_idx;
CREATE INDEX cairnq_tasks_claim_name_idx
    ON cairnq_tasks (queue, status, name, priority DESC, run_at_ms, id);
UPDATE cairnq_meta SET value = '8' WHERE key = 'schema_version';
