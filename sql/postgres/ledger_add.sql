-- ledger_add: record the migration %(name)s as applied now (database clock), in the
-- transaction that applied it.
-- Params: %(name)s (the file name with its extension)
insert into cairnq_migrations (name, applied_at_ms)
values (%(name)s, (extract(epoch from now()) * 1000)::bigint);
