-- schema_columns: every column of the listed tables, for the schema check at open:
-- table, column, declared type, not null, has a default, position in the primary
-- key (0 when not in it). Params: :tables, a JSON array of table names.
select m.name, c.name, c.type, c."notnull", c.dflt_value is not null, c.pk
from sqlite_master as m join pragma_table_info(m.name) as c
where m.type = 'table' and m.name in (select t.value from json_each(:tables) as t)
order by m.name, c.cid;
