-- insert_task: one new queued task, timed by the database clock.
-- Params: :id, :name, :queue, :payload and :metadata (JSON text), :max_attempts,
--   :priority, :parent_id, :root_id, :correlation_id, :delay_ms (relative).
-- clock_timestamp(), not now(): in a keyed submit this runs after waiting on the
-- key's advisory lock, when the transaction's start time is already stale.
-- Read once, so created_at_ms = updated_at_ms. Returns the row.
insert into cairnq_tasks (
    id, name, queue, status, payload, metadata, max_attempts, priority,
    parent_id, root_id, correlation_id, run_at_ms, created_at_ms, updated_at_ms
)
select
    :id, :name, :queue, 'queued', :payload::jsonb, :metadata::jsonb,
    :max_attempts::integer, :priority::integer,
    :parent_id::text, :root_id::text, :correlation_id::text,
    clock.now_ms + :delay_ms::bigint, clock.now_ms, clock.now_ms
from (select (extract(epoch from clock_timestamp()) * 1000)::bigint as now_ms) as clock
returning *
