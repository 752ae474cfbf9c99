-- installations (Postgres only): the session's current_schema() and every schema
-- in the database holding an ordinary table cairnq_tasks, found in the catalog
-- (not through search_path). Outer-joined to one constant row, so a database with
-- no installation still yields one row, with a NULL schema. Feeds the schema
-- guard run before migrations. No params.
select current_schema()::text as current_schema, found.schema
from (select 1) as one
left join (
    select n.nspname::text as schema
    from pg_catalog.pg_class as c
    join pg_catalog.pg_namespace as n on n.oid = c.relnamespace
    where c.relname = 'cairnq_tasks' and c.relkind = 'r'
) as found on true
order by found.schema
