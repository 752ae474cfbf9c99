-- ledger_has: one row if the migration %(name)s is recorded as applied, none otherwise.
-- Params: %(name)s (the file name with its extension)
select 1 as applied from cairnq_migrations where name = %(name)s;
