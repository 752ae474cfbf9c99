-- 0004_lease_index: recovery and the probe's lease arm look up expired leases.
CREATE INDEX IF NOT EXISTS cairnq_tasks_lease_idx ON cairnq_tasks (lease_until_ms)
    WHERE status = 'running' AND lease_until_ms IS NOT NULL;
UPDATE cairnq_meta SET value = '4' WHERE key = 'schema_version';
