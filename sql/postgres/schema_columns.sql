-- schema_columns: every column of the listed tables in the session's current schema
-- (the store's, after the schema guard), for the schema check at connect.
-- Filtered on pg_class by name and namespace, which its unique index answers; by
-- namespace alone it would scan a catalog that can be large.
-- Params: %(tables)s, a text array of table names.
select c.relname as table_name, a.attname as column_name,
    format_type(a.atttypid, a.atttypmod) as type, a.attnotnull as not_null,
    (a.atthasdef or a.attidentity <> '' or a.attgenerated <> '') as has_default
from pg_catalog.pg_attribute as a
join pg_catalog.pg_class as c on c.oid = a.attrelid
where c.relnamespace = current_schema()::regnamespace and c.relkind in ('r', 'p')
    and c.relname = any(%(tables)s::text[]) and a.attnum > 0 and not a.attisdropped;
