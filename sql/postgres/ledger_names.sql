-- ledger_names: the migrations recorded as applied (the schema check reads them).
-- Params: none
select name from cairnq_migrations;
