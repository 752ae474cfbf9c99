-- ledger_add: record the migration :name as applied, in the transaction that applied it.
-- Params: :name (the file name with its extension), :now_ms
insert into cairnq_migrations (name, applied_at_ms) values (:name, :now_ms);
