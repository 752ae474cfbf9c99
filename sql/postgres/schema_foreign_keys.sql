-- schema_foreign_keys: every single-column foreign key of the listed tables in the
-- session's current schema, for the schema check at connect: table, column,
-- target table and column, whether deletes cascade.
-- Params: %(tables)s, a text array of table names.
select c.relname as table_name, a.attname as column_name, r.relname as target,
    ra.attname as target_column, k.confdeltype = 'c' as cascade
from pg_catalog.pg_constraint as k
join pg_catalog.pg_class as c on c.oid = k.conrelid
join pg_catalog.pg_class as r on r.oid = k.confrelid
join pg_catalog.pg_attribute as a on a.attrelid = k.conrelid and a.attnum = k.conkey[1]
join pg_catalog.pg_attribute as ra on ra.attrelid = k.confrelid and ra.attnum = k.confkey[1]
where k.contype = 'f' and c.relnamespace = current_schema()::regnamespace
    and c.relname = any(%(tables)s::text[]);
