-- inspect_sorted_completed_newer: finished tasks in completion order (asc), strictly
-- after the cursor (:cursor_ms, :cursor_id), completed within [:from_ms, :to_ms).
-- A completion index serves each filter: the partial (queue, completed_at_ms) for a
-- queue (its three-status predicate is spelled out), else (status, completed_at_ms)
-- for a status, else (completed_at_ms). SQLite plans a statement once, whatever its
-- values, so each is a branch of its own, guarded so that exactly one runs (a guard
-- names only parameters: SQLite tests it before its branch reads a row); the
-- branches are merged in order and the walk stops at :limit rows.
-- "status = +:status": with a bare parameter SQLite weighs the value against the
-- partial lease index's "status = 'running'" and compiles the statement again at
-- each new status; the unary plus (same value) keeps the seek and the compiled plan.
-- Params: :status, :queue, :name (NULL = any); :from_ms, :to_ms; :cursor_ms,
-- :cursor_id (the first page passes a cursor past every row); :limit.
select id, name, queue, status, attempt, max_attempts, priority, worker_id, lease_until_ms,
       run_at_ms, cancel_requested_at_ms, progress, substr(message, 1, 200) as message,
       created_at_ms, updated_at_ms, completed_at_ms
from cairnq_tasks
where :queue is not null
  and queue = :queue
  and (:status is null or status = :status)
  and (:name is null or name = :name)
  and status in ('succeeded', 'failed', 'canceled')
  and completed_at_ms >= :from_ms and completed_at_ms < :to_ms
  and completed_at_ms >= :cursor_ms
  and (completed_at_ms > :cursor_ms or id > :cursor_id)
union all
select id, name, queue, status, attempt, max_attempts, priority, worker_id, lease_until_ms,
       run_at_ms, cancel_requested_at_ms, progress, substr(message, 1, 200) as message,
       created_at_ms, updated_at_ms, completed_at_ms
from cairnq_tasks
where :queue is null and :status is not null
  and status = +:status
  and (:name is null or name = :name)
  and status in ('succeeded', 'failed', 'canceled')
  and completed_at_ms >= :from_ms and completed_at_ms < :to_ms
  and completed_at_ms >= :cursor_ms
  and (completed_at_ms > :cursor_ms or id > :cursor_id)
union all
select id, name, queue, status, attempt, max_attempts, priority, worker_id, lease_until_ms,
       run_at_ms, cancel_requested_at_ms, progress, substr(message, 1, 200) as message,
       created_at_ms, updated_at_ms, completed_at_ms
from cairnq_tasks
where :queue is null and :status is null
  and (:name is null or name = :name)
  and status in ('succeeded', 'failed', 'canceled')
  and completed_at_ms >= :from_ms and completed_at_ms < :to_ms
  and completed_at_ms >= :cursor_ms
  and (completed_at_ms > :cursor_ms or id > :cursor_id)
order by completed_at_ms asc, id asc
limit :limit;
