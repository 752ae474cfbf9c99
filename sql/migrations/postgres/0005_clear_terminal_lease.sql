-- 0005_clear_terminal_lease.sql (Postgres): data fix for the lease invariant
-- (a lease exists only while running); older writers left leases on settled rows.
update cairnq_tasks set lease_until_ms = null
where status <> 'running' and lease_until_ms is not null;

update cairnq_meta set value = '5' where key = 'schema_version';
