-- schema_foreign_keys: every foreign key of the listed tables, for the schema check
-- at open: table, column, target table, target column, on delete action.
-- Params: :tables, a JSON array of table names.
select m.name, f."from", f."table", f."to", f.on_delete
from sqlite_master as m join pragma_foreign_key_list(m.name) as f
where m.type = 'table' and m.name in (select t.value from json_each(:tables) as t);
