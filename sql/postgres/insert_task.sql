-- insert_task: one new queued task, timed by the database clock.
-- Params: %(id)s, %(name)s, %(queue)s, %(payload)s and %(metadata)s (JSON text), %(max_attempts)s,
--   %(priority)s, %(parent_id)s, %(root_id)s, %(correlation_id)s, %(delay_ms)s (relative).
-- clock_timestamp(), not now(): in a keyed submit this runs after waiting on the
-- key's advisory lock, when the transaction's start time is already stale.
-- Read once, so created_at_ms = updated_at_ms. Returns the row.
insert into cairnq_tasks (
    id, name, queue, status, payload, metadata, max_attempts, priority,
    parent_id, root_id, correlation_id, run_at_ms, created_at_ms, updated_at_ms
)
select
    %(id)s, %(name)s, %(queue)s, 'queued', %(payload)s::jsonb, %(metadata)s::jsonb,
    %(max_attempts)s::integer, %(priority)s::integer,
    %(parent_id)s::text, %(root_id)s::text, %(correlation_id)s::text,
    clock.now_ms + %(delay_ms)s::bigint, clock.now_ms, clock.now_ms
from (select (extract(epoch from clock_timestamp()) * 1000)::bigint as now_ms) as clock
returning *
