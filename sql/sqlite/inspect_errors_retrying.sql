-- inspect_errors_retrying: queued tasks waiting for a retry after an error whose
-- error type or message contains :text (lower-cased), newest failure first. Only
-- the first :scan_limit queued tasks the (status, completed_at_ms) index yields are
-- looked at (the order by names the index's column so that every planner walks it
-- rather than reading the table until enough queued rows turned up), so the read
-- is bounded whatever the backlog.
-- :raw_text is :text when the raw JSON must hold it as is (else NULL): a cheap
-- look at the column before decoding the envelope, which most rows then skip.
-- Params: :text, :raw_text; :queue, :name (NULL = any); :scan_limit; :limit.
select t.id, t.name, t.queue, t.status, t.attempt, t.max_attempts, t.priority, t.worker_id,
       t.lease_until_ms, t.run_at_ms, t.cancel_requested_at_ms, t.progress,
       substr(t.message, 1, 200) as message, t.created_at_ms, t.updated_at_ms,
       t.completed_at_ms,
       json_extract(t.error, '$.type') as error_type,
       substr(json_extract(t.error, '$.message'), 1, 2000) as error_message
from (
    select * from cairnq_tasks
    where status = 'queued'
    order by completed_at_ms
    limit :scan_limit
) as t
where t.error is not null
  and (:queue is null or t.queue = :queue)
  and (:name is null or t.name = :name)
  and (:raw_text is null or instr(lower(t.error), :raw_text) > 0)
  and instr(lower(coalesce(json_extract(t.error, '$.type'), '') || char(10)
                  || coalesce(json_extract(t.error, '$.message'), '')), :text) > 0
order by t.updated_at_ms desc, t.id desc
limit :limit;
