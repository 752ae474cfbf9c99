-- schema_indexes: one row per key column of every index on the listed tables, in
-- index order, for the schema check at open: table, index, unique, origin ('pk'
-- for the primary key's own index), column, descending.
-- Params: :tables, a JSON array of table names.
select m.name, l.name, l."unique", l.origin, x.name, x."desc"
from sqlite_master as m
join pragma_index_list(m.name) as l
join pragma_index_xinfo(l.name) as x
where m.type = 'table' and m.name in (select t.value from json_each(:tables) as t)
    and x.key = 1
order by l.name, x.seqno;
