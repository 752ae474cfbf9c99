-- purge_in_queue: purge (see purge.sql) of one %(queue)s; engine-only, Postgres.
-- Deletes up to %(limit)s terminal tasks of %(queue)s completed strictly before
-- now - %(older_than_ms)s, oldest first; key rows go by cascade. Optional filters
-- %(status)s (terminal), %(name)s (NULL = any). Candidates are taken FOR UPDATE SKIP
-- LOCKED. Returns the deleted ids, oldest first.
-- Run unprepared (engine/store/_pg_statements.py PLANNED_WITH_VALUES): the server
-- plans each call with its values, so a filter given one seeks its index and one
-- left NULL drops out of the plan.
-- The candidates are an ordered walk of the partial (queue, completed_at_ms) index
-- over terminal rows (its predicate spelled out), stopping at %(limit)s, whatever the
-- planner statistics: the name test is wrapped in coalesce(..., false) and the
-- limit read through a sub-select, as in purge.sql.
-- Params: %(older_than_ms)s, %(queue)s, %(status)s, %(name)s, %(limit)s.
with deleted as (
    delete from cairnq_tasks
    where id = any (array(
        select id
        from cairnq_tasks
        where queue = %(queue)s::text
            and status in ('succeeded', 'failed', 'canceled')
            and (%(status)s::text is null or status = %(status)s::text)
            and (%(name)s::text is null or coalesce(name = %(name)s::text, false))
            and completed_at_ms
                < (extract(epoch from now()) * 1000)::bigint - %(older_than_ms)s::bigint
        order by completed_at_ms
        limit (select %(limit)s::bigint)
        for update skip locked
    ))
    returning id, completed_at_ms
)
select id from deleted order by completed_at_ms, id
