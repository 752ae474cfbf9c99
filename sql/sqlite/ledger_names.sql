-- ledger_names: the migrations recorded as applied (read before taking the write lock;
-- ledger_has re-checks each one inside it).
-- Params: none
select name from cairnq_migrations;
