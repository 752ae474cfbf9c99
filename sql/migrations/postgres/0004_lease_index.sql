-- 0004_lease_index.sql (Postgres): recovery and the probe's lease arm look only
-- at running rows holding a lease, so the index holds only those.
create index if not exists cairnq_tasks_lease_idx on cairnq_tasks (lease_until_ms)
    where status = 'running' and lease_until_ms is not null;

update cairnq_meta set value = '4' where key = 'schema_version';
