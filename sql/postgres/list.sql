-- list: tasks matching every given filter (NULL = unfiltered), newest first.
-- Params: :status, :queue, :name, :root_id, :correlation_id, :limit, :offset.
-- Run unprepared (engine/store/_pg_statements.py PLANNED_WITH_VALUES): the server
-- plans each call with its values, so a filter given one seeks its index and one
-- left NULL drops out of the plan.
select *
from cairnq_tasks
where (:status::text is null or status = :status::text)
    and (:queue::text is null or queue = :queue::text)
    and (:name::text is null or name = :name::text)
    and (:root_id::text is null or root_id = :root_id::text)
    and (:correlation_id::text is null or correlation_id = :correlation_id::text)
order by created_at_ms desc, id desc
limit :limit::bigint offset :offset::bigint
