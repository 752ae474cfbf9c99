-- ledger_add: record the migration :name as applied now (database clock), in the
-- transaction that applied it.
-- Params: :name (the file name with its extension)
insert into cairnq_migrations (name, applied_at_ms)
values (:name, (extract(epoch from now()) * 1000)::bigint);
