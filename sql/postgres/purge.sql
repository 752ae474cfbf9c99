-- purge: delete up to :limit terminal tasks completed strictly before
-- now - :older_than_ms, oldest first; key rows go by cascade. Optional filters
-- :queue, :status (terminal), :name (NULL = any). Candidates are taken
-- FOR UPDATE SKIP LOCKED so a row retried meanwhile is never deleted.
-- Returns the deleted ids, oldest first. The candidates come as an array so the
-- delete finds each by primary key; "id in (subquery)" was planned as a hash
-- join over a sequential scan of the whole table, whose cost grew with it.
-- Run unprepared (engine/store/_pg_statements.py PLANNED_WITH_VALUES): the server
-- plans each call with its values, so a filter given one seeks its index and one
-- left NULL drops out of the plan.
with deleted as (
    delete from cairnq_tasks
    where id = any (array(
        select id
        from cairnq_tasks
        where status in ('succeeded', 'failed', 'canceled')
            and (:queue::text is null or queue = :queue::text)
            and (:status::text is null or status = :status::text)
            and (:name::text is null or name = :name::text)
            and completed_at_ms is not null
            and completed_at_ms
                < (extract(epoch from now()) * 1000)::bigint - :older_than_ms::bigint
        order by completed_at_ms
        limit :limit::bigint
        for update skip locked
    ))
    returning id, completed_at_ms
)
select id from deleted order by completed_at_ms, id
