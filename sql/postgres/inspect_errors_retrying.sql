-- inspect_errors_retrying: queued tasks waiting for a retry after an error whose
-- error type or message contains %(text)s (lower-cased), newest failure first. Only
-- the first %(scan_limit)s queued tasks the (status, completed_at_ms) index yields are
-- looked at (the order by names the index's column so that every planner walks it
-- rather than reading the table until enough queued rows turned up), so the read
-- is bounded whatever the backlog.
-- (:raw_text, SQLite's cheap look at the raw JSON, is not used: rendering jsonb as
-- text costs more here than reading the two fields.)
-- Params: %(text)s; %(queue)s, %(name)s (NULL = any); %(scan_limit)s; %(limit)s.
-- Run unprepared (engine/store/_pg_statements.py PLANNED_WITH_VALUES): the server
-- plans each call with its values, so a filter given one seeks its index and one
-- left NULL drops out of the plan.
select t.id, t.name, t.queue, t.status, t.attempt, t.max_attempts, t.priority, t.worker_id,
       t.lease_until_ms, t.run_at_ms, t.cancel_requested_at_ms, t.progress,
       substr(t.message, 1, 200) as message, t.created_at_ms, t.updated_at_ms,
       t.completed_at_ms,
       t.error ->> 'type' as error_type,
       left(t.error ->> 'message', 2000) as error_message
from (
    select * from cairnq_tasks
    where status = 'queued'
    order by completed_at_ms
    limit %(scan_limit)s
) as t
where t.error is not null
  and (%(queue)s::text is null or t.queue = %(queue)s::text)
  and (%(name)s::text is null or t.name = %(name)s::text)
  and strpos(lower(coalesce(t.error ->> 'type', '') || E'\n' || coalesce(t.error ->> 'message', '')),
             %(text)s::text) > 0
order by t.updated_at_ms desc, t.id desc
limit %(limit)s;
