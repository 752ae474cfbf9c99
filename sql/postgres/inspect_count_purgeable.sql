-- inspect_count_purgeable: how many tasks a purge with these filters would delete,
-- counting at most :cap rows; the same candidates as purge (terminal, completed
-- strictly before :before_ms) read through the same indexes.
-- Params: :before_ms; :queue, :status, :name (NULL = any); :cap.
-- Run unprepared (engine/store/_pg_statements.py PLANNED_WITH_VALUES): the server
-- plans each call with its values, so a filter given one seeks its index and one
-- left NULL drops out of the plan.
select count(*) as n
from (
    select 1 from cairnq_tasks
    where status in ('succeeded', 'failed', 'canceled')
      and completed_at_ms is not null
      and completed_at_ms < :before_ms
      and (:queue::text is null or queue = :queue::text)
      and (:status::text is null or status = :status::text)
      and (:name::text is null or name = :name::text)
    limit :cap
) as capped;
