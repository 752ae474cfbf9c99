-- inspect_server: what a health check reads from the server itself: its clock
-- (leases are stamped with the clock of whoever writes them, so a skew between
-- hosts shortens or stretches them), its durability settings and the database's
-- size on disk. No params; touches no table.
select (extract(epoch from clock_timestamp()) * 1000)::bigint as now_ms,
       current_setting('synchronous_commit') as synchronous_commit,
       current_setting('fsync') as fsync,
       pg_database_size(current_database()) as db_bytes;
