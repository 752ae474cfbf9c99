-- inspect_count_tasks_by_key: how many tasks have a key starting with a prefix (and
-- match the filters), counting at most :cap rows.
-- Params: :key_from, :key_to (the prefix as a range; :key_to NULL = open); :status,
-- :queue, :name (NULL = any); :cap.
-- Run unprepared (engine/store/_pg_statements.py PLANNED_WITH_VALUES): the server
-- plans each call with its values, so a filter given one seeks its index and one
-- left NULL drops out of the plan.
select count(*) as n
from (
    select 1
    from cairnq_task_keys k
    join cairnq_tasks t on t.id = k.task_id
    where k.key >= :key_from
      and (:key_to::text is null or k.key < :key_to::text)
      and (:status::text is null or t.status = :status::text)
      and (:queue::text is null or t.queue = :queue::text)
      and (:name::text is null or t.name = :name::text)
    limit :cap
) as capped;
