-- purge: delete up to %(limit)s terminal tasks completed strictly before
-- now - %(older_than_ms)s, oldest first; key rows go by cascade. Optional filters
-- %(queue)s, %(status)s (terminal), %(name)s (NULL = any); the store runs purge_in_queue
-- when a queue is given. Candidates are taken FOR UPDATE SKIP LOCKED so a row
-- retried meanwhile is never deleted. Returns the deleted ids, oldest first.
-- Run unprepared (engine/store/_pg_statements.py PLANNED_WITH_VALUES): the server
-- plans each call with its values, so a filter given one seeks its index and one
-- left NULL drops out of the plan.
-- The plan must not depend on planner statistics (a table that is new, or filled
-- faster than autoanalyze runs, has none): the candidates are an ordered walk of
-- cairnq_tasks_completed_idx, or of cairnq_tasks_status_completed_idx for a status,
-- stopping at %(limit)s. Without statistics the planner guessed few candidates, so
-- it read them all by another index and sorted them. So the terminal-status and
-- name tests are wrapped in coalesce(..., false) (same meaning in a WHERE): no
-- index serves them and they are not taken as selective; and the limit is read
-- through a sub-select, so the plan is made for a small share of the candidates
-- (a tenth), which the ordered walk serves by reading about that many, whatever
-- their estimated number (tests/engine/test_query_plans.py). The candidates come
-- as an array so the delete finds each by primary key.
-- Params: %(older_than_ms)s, %(queue)s, %(status)s, %(name)s, %(limit)s.
with deleted as (
    delete from cairnq_tasks
    where id = any (array(
        select id
        from cairnq_tasks
        where coalesce(status in ('succeeded', 'failed', 'canceled'), false)
            and (%(queue)s::text is null or queue = %(queue)s::text)
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
