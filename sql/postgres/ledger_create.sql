-- ledger_create: the migration ledger, if missing (docs/protocol-notes.md, "Schema and
-- migrations": the SDK creates it, not a migration). Run under the cold-start lock.
-- Params: none
create table if not exists cairnq_migrations (
    name text primary key,
    applied_at_ms bigint not null
);
