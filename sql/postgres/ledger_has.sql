-- ledger_has: one row if the migration :name is recorded as applied, none otherwise.
-- Params: :name (the file name with its extension)
select 1 as applied from cairnq_migrations where name = :name;
