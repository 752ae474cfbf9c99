-- ledger_create: the migration ledger, if missing (docs/protocol-notes.md, "Schema and
-- migrations": the SDK creates it, not a migration). One line: SQLite keeps the text
-- of a CREATE TABLE in sqlite_master as written.
-- Params: none
create table if not exists cairnq_migrations (name TEXT PRIMARY KEY, applied_at_ms INTEGER NOT NULL);
