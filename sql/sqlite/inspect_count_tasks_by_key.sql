-- inspect_count_tasks_by_key: how many tasks have a key starting with a prefix (and
-- match the filters), counting at most :cap rows.
-- Params: :key_from, :key_to (the prefix as a range; :key_to NULL = open); :status,
-- :queue, :name (NULL = any); :cap.
select count(*) as n
from (
    select 1
    from cairnq_task_keys k
    join cairnq_tasks t on t.id = k.task_id
    where k.key >= :key_from
      and k.key < coalesce(:key_to, x'') -- x'' (a BLOB) sorts after every text: open
      and (:status is null or t.status = :status)
      and (:queue is null or t.queue = :queue)
      and (:name is null or t.name = :name)
    limit :cap
) as capped;
