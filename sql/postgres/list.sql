-- list: tasks matching every given filter (NULL = unfiltered), newest first.
-- Params: :status, :queue, :name, :root_id, :correlation_id, :limit, :offset.
-- Filters with a value are rewritten to plain equalities before preparing
-- (engine._sql.specialise) so each can use its index.
select *
from cairnq_tasks
where (:status::text is null or status = :status::text)
    and (:queue::text is null or queue = :queue::text)
    and (:name::text is null or name = :name::text)
    and (:root_id::text is null or root_id = :root_id::text)
    and (:correlation_id::text is null or correlation_id = :correlation_id::text)
order by created_at_ms desc, id desc
limit :limit::bigint offset :offset::bigint
