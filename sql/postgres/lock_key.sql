-- lock_key: the first statement of every keyed transaction. A transaction-scoped
-- advisory lock on exactly hashtextextended(key, 0), the lock every cairnq SDK
-- takes, so same-key submits from any SDK are serialised. Params: %(key)s.
select pg_advisory_xact_lock(hashtextextended(%(key)s::text, 0))
