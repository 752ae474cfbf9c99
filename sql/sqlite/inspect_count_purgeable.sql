-- inspect_count_purgeable: how many tasks a purge with these filters would delete,
-- counting at most :cap rows; the same candidates as purge (terminal, completed
-- strictly before :before_ms). One branch per filter that leads an index, each
-- guarded so that exactly one runs (SQLite plans a statement once, whatever its
-- values): all three filters seek claim_name_idx (queue, status, name); a queue
-- the partial (queue, completed_at_ms) index, else a status
-- (status, completed_at_ms), else a name name_idx, else the completion range.
-- "status = +:status": with a bare parameter SQLite weighs the value against the
-- partial lease index's "status = 'running'" and compiles the statement again at
-- each new status; the unary plus (same value) keeps the seek and the compiled plan.
-- Params: :before_ms; :queue, :status, :name (NULL = any); :cap.
select count(*) as n
from (
    select 1 from cairnq_tasks
    where :queue is not null and :status is not null and :name is not null
      and queue = :queue and status = +:status and name = :name
      and status in ('succeeded', 'failed', 'canceled')
      and completed_at_ms is not null
      and completed_at_ms < :before_ms
    union all
    select 1 from cairnq_tasks
    where :queue is not null and (:status is null or :name is null)
      and queue = :queue
      and status in ('succeeded', 'failed', 'canceled')
      and completed_at_ms is not null
      and completed_at_ms < :before_ms
      and (:status is null or status = :status)
      and (:name is null or name = :name)
    union all
    select 1 from cairnq_tasks
    where :queue is null and :status is not null
      and status = +:status
      and status in ('succeeded', 'failed', 'canceled')
      and completed_at_ms is not null
      and completed_at_ms < :before_ms
      and (:name is null or name = :name)
    union all
    select 1 from cairnq_tasks
    where :queue is null and :status is null and :name is not null
      and name = :name
      and status in ('succeeded', 'failed', 'canceled')
      and completed_at_ms is not null
      and completed_at_ms < :before_ms
    union all
    select 1 from cairnq_tasks
    where :queue is null and :status is null and :name is null
      and status in ('succeeded', 'failed', 'canceled')
      and completed_at_ms is not null
      and completed_at_ms < :before_ms
    limit :cap
) as capped;
