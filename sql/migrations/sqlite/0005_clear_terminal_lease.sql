-- 0005_clear_terminal_lease: restore the invariant "a lease only while running".
UPDATE cairnq_tasks SET lease_until_ms = NULL
    WHERE status <> 'running' AND lease_until_ms IS NOT NULL;
UPDATE cairnq_meta SET value = '5' WHERE key = 'schema_version';
