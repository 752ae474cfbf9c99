-- inspect_count_purgeable: how many tasks a purge with these filters would delete,
-- counting at most :cap rows; the same candidates as purge (terminal, completed
-- strictly before :before_ms) read through the same indexes.
-- Params: :before_ms; :queue, :status, :name (NULL = any); :cap.
select count(*) as n
from (
    select 1 from cairnq_tasks
    where status in ('succeeded', 'failed', 'canceled')
      and completed_at_ms is not null
      and completed_at_ms < :before_ms
      and (:queue is null or queue = :queue)
      and (:status is null or status = :status)
      and (:name is null or name = :name)
    limit :cap
) as capped;
