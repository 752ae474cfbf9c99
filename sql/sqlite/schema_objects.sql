-- schema_objects (SQLite only): the tables, indexes and triggers on the listed
-- tables, with their CREATE text, for the schema check at open
-- (engine/store/_schema_check.py). Params: :tables, a JSON array of table names.
select type, name, tbl_name, sql
from sqlite_master
where tbl_name in (select t.value from json_each(:tables) as t);
