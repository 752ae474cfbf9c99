-- ledger_lock: hold the migration ledger for the rest of the transaction, so concurrent
-- cold starts (of this engine or any cairnq SDK) apply each migration exactly once.
-- Params: none
lock table cairnq_migrations in exclusive mode;
