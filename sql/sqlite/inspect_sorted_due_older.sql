-- inspect_sorted_due_older: tasks in order of due time (run_at_ms) (desc), strictly before
-- the cursor (:cursor_ms, :cursor_id), with that time within [:from_ms, :to_ms).
-- No protocol index orders by this column, so the sort covers a window: the newest
-- :scan_limit tasks matching the filters, found by walking the primary key from
-- the newest id (the filters are written "(col = :p or :p is null)": no index
-- serves that form, so the walk is kept). The sort never holds more than the window.
-- Params: :status, :queue, :name (NULL = any); :from_ms, :to_ms; :cursor_ms,
-- :cursor_id (the first page passes a cursor past every row); :scan_limit; :limit.
select t.id, t.name, t.queue, t.status, t.attempt, t.max_attempts, t.priority, t.worker_id,
       t.lease_until_ms, t.run_at_ms, t.cancel_requested_at_ms, t.progress,
       substr(t.message, 1, 200) as message, t.created_at_ms, t.updated_at_ms, t.completed_at_ms
from (
    select * from cairnq_tasks
    where (status = :status or :status is null)
      and (queue = :queue or :queue is null)
      and (name = :name or :name is null)
    order by id desc
    limit :scan_limit
) as t
where t.run_at_ms >= :from_ms and t.run_at_ms < :to_ms
  and t.run_at_ms <= :cursor_ms
  and (t.run_at_ms < :cursor_ms or t.id < :cursor_id)
order by t.run_at_ms desc, t.id desc
limit :limit;
