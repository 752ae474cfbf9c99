-- insert_tasks: several new queued tasks in one statement (the group commit's
-- form of insert_task for plain submits arriving together; engine-only, not a
-- protocol statement). Param %(rows)s, a JSON array with one object per task,
-- each holding insert_task's params under the same names: id, name, queue,
-- payload and metadata (JSON text, as JSON strings), max_attempts, priority,
-- parent_id, root_id, correlation_id, delay_ms (relative).
-- Every row gets what insert_task would give it; the clock is read once, so the
-- rows of one statement share created_at_ms. Rows are written in id order.
-- Returns the rows.
insert into cairnq_tasks (
    id, name, queue, status, payload, metadata, max_attempts, priority,
    parent_id, root_id, correlation_id, run_at_ms, created_at_ms, updated_at_ms
)
select
    t.id, t.name, t.queue, 'queued', t.payload::jsonb, t.metadata::jsonb,
    t.max_attempts, t.priority, t.parent_id, t.root_id, t.correlation_id,
    clock.now_ms + t.delay_ms, clock.now_ms, clock.now_ms
from (select (extract(epoch from clock_timestamp()) * 1000)::bigint as now_ms) as clock,
    json_to_recordset(%(rows)s::json) as t(
        id text, name text, queue text, payload text, metadata text,
        max_attempts integer, priority integer, parent_id text, root_id text,
        correlation_id text, delay_ms bigint
    )
order by t.id
returning *
