-- purge_by_age: purge (see purge.sql) when no queue is given; engine-only, SQLite.
-- Deletes up to :limit terminal tasks completed strictly before :before_ms, oldest
-- first; their key rows go with them (on delete cascade).
-- Each purge(limit=n) must read about n candidates in completion order, not sort
-- every candidate of the backlog to keep n. Two branches, exactly one of which
-- runs (its guard on :status is true): with a status, a walk of (status,
-- completed_at_ms) from that status; without, a walk of (completed_at_ms). Without
-- a status the planner chose (with or without statistics) the three statuses of
-- (status, completed_at_ms) or every row of a name, then sorted them all: the
-- unary + on the status list and on the name term (same meaning) hides those
-- indexes (tests/engine/test_query_plans.py).
-- "status = +:status": with a bare parameter SQLite weighs the value against the
-- partial lease index's "status = 'running'" and compiles the statement again at
-- each new status; the unary plus (same value) keeps the seek and the compiled plan.
-- Params: :before_ms, :status, :name (NULL = no filter), :limit
with doomed(id) as (
    select id from (
        select t.id
        from cairnq_tasks as t
        where :status is not null
          and t.status = +:status
          and +status in ('succeeded', 'failed', 'canceled')
          and (:name is null or +t.name = :name)
          and t.completed_at_ms is not null -- the index range then skips live rows
          and t.completed_at_ms < :before_ms
        order by t.completed_at_ms asc
        limit :limit
    )
    union all
    select id from (
        select t.id
        from cairnq_tasks as t
        where :status is null
          and +status in ('succeeded', 'failed', 'canceled')
          and (:name is null or +t.name = :name)
          and t.completed_at_ms is not null
          and t.completed_at_ms < :before_ms
        order by t.completed_at_ms asc
        limit :limit
    )
)
delete from cairnq_tasks
where id in doomed
returning id;
