-- schema_triggers (Postgres only): the user triggers on the listed tables in the
-- session's current schema, with their definitions and whether they are enabled,
-- for the schema check at connect. Params: %(tables)s, a text array of table names.
select g.tgname as trigger_name, c.relname as table_name,
    pg_get_triggerdef(g.oid) as definition, g.tgenabled <> 'D' as enabled
from pg_catalog.pg_trigger as g
join pg_catalog.pg_class as c on c.oid = g.tgrelid
where c.relnamespace = current_schema()::regnamespace and c.relname = any(%(tables)s::text[])
    and not g.tgisinternal;
