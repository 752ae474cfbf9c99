-- schema_indexes: every index on the listed tables in the session's current schema,
-- for the schema check at connect: uniqueness, primary, access method, predicate,
-- and its key columns in order (' desc' appended to a descending one; an
-- expression shows as '(expression)'). Params: %(tables)s, a text array of table names.
select t.relname as table_name, i.relname as index_name, x.indisunique as is_unique,
    x.indisprimary as is_primary, am.amname as method,
    pg_get_expr(x.indpred, x.indrelid) as predicate,
    array(
        select coalesce(a.attname, '(expression)')
            || case when k.o <= x.indnkeyatts and x.indoption[k.o - 1] & 1 = 1
                then ' desc' else '' end
        from unnest(x.indkey) with ordinality as k(attnum, o)
        left join pg_catalog.pg_attribute as a
            on a.attrelid = x.indrelid and a.attnum = k.attnum
        where k.o <= x.indnkeyatts
        order by k.o
    ) as columns
from pg_catalog.pg_index as x
join pg_catalog.pg_class as i on i.oid = x.indexrelid
join pg_catalog.pg_class as t on t.oid = x.indrelid
join pg_catalog.pg_am as am on am.oid = i.relam
where t.relnamespace = current_schema()::regnamespace and t.relname = any(%(tables)s::text[]);
