-- inspect_count_tasks: how many tasks match the filters, counting at most :cap rows
-- (a result equal to :cap means "at least"), so a refresh never scans a big table.
-- Each filter combination reads a covering index: claim_idx (queue, status),
-- claim_name_idx (queue, status, name), name_idx, status_completed_idx.
-- Params: :status, :queue, :name (NULL = any); :id_from, :id_to (an id-prefix range,
-- NULL = open); :cap.
-- Run unprepared (engine/store/_pg_statements.py PLANNED_WITH_VALUES): the server
-- plans each call with its values, so a filter given one seeks its index and one
-- left NULL drops out of the plan.
select count(*) as n
from (
    select 1 from cairnq_tasks
    where (:status::text is null or status = :status::text)
      and (:queue::text is null or queue = :queue::text)
      and (:name::text is null or name = :name::text)
      and (:id_from::text is null or id >= :id_from::text)
      and (:id_to::text is null or id < :id_to::text)
    limit :cap
) as capped;
