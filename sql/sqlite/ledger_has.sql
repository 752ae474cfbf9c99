-- ledger_has: one row if the migration :name is recorded as applied, none otherwise.
-- Run inside the migration's BEGIN IMMEDIATE, so concurrent cold starts (of this
-- engine or any cairnq SDK) apply each migration exactly once.
-- Params: :name (the file name with its extension)
select 1 as applied from cairnq_migrations where name = :name;
