-- inspect_count_tasks: how many tasks match the filters, counting at most :cap rows
-- (a result equal to :cap means "at least"), so a refresh never scans a big table.
-- Each filter combination reads a covering index: claim_idx (queue, status),
-- claim_name_idx (queue, status, name), name_idx, status_completed_idx.
-- Params: :status, :queue, :name (NULL = any); :id_from, :id_to (an id-prefix range,
-- NULL = open); :cap.
select count(*) as n
from (
    select 1 from cairnq_tasks
    where (:status is null or status = :status)
      and (:queue is null or queue = :queue)
      and (:name is null or name = :name)
      and (:id_from is null or id >= :id_from)
      and (:id_to is null or id < :id_to)
    limit :cap
) as capped;
