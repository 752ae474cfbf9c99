-- lock_key: opens every keyed transaction. On SQLite BEGIN IMMEDIATE already
-- serialises writers, so this is a constant; :key is accepted and unused.
-- Params: :key (unused)
select 1 as serialised_by_begin_immediate;
