-- inspect_tasks_sparse_older: a page of tasks, newest first, strictly older than a cursor,
-- for filters that match few rows (the caller knows from inspect_count_tasks). The
-- filters are specialised to equalities so a covering index (claim, claim_name,
-- name, status_completed) finds the matching ids; "+id" keeps SQLite from walking
-- the primary key instead; only the page's rows are then read in full.
-- Params: :status, :queue, :name (NULL = any); :id_from, :id_to (an id-prefix
-- range, NULL = open); :before_id (the cursor, NULL = from the newest); :limit.
select id, name, queue, status, attempt, max_attempts, priority, worker_id, lease_until_ms,
       run_at_ms, cancel_requested_at_ms, progress, substr(message, 1, 200) as message,
       created_at_ms, updated_at_ms, completed_at_ms
from cairnq_tasks
where id in (
    select id from cairnq_tasks
    where (:status is null or status = :status)
      and (:queue is null or queue = :queue)
      and (:name is null or name = :name)
      and (:id_from is null or id >= :id_from)
      and (:id_to is null or id < :id_to)
      and (:before_id is null or id < :before_id)
    order by +id desc
    limit :limit
)
order by id desc;
