-- purge_by_age: purge (see purge.sql) when no queue is given; engine-only, SQLite.
-- Deletes up to :limit terminal tasks completed strictly before :before_ms, oldest
-- first; their key rows go with them (on delete cascade).
-- Each purge(limit=n) must read about n candidates in completion order, not sort
-- every candidate of the backlog to keep n. Without a queue the planner chose
-- (with or without statistics) the three statuses of (status, completed_at_ms) or
-- every row of a name, then sorted them all. The unary + on the status list and on
-- the name term (same meaning) hides those indexes, so (completed_at_ms), or
-- (status, completed_at_ms) for one status, is the one walked
-- (tests/engine/test_query_plans.py). The status filter keeps the shape
-- engine._sql.specialise rewrites; the name term does not (it must stay unindexed).
-- Params: :before_ms, :status, :name (NULL = no filter), :limit
with doomed(id) as (
    select t.id
    from cairnq_tasks as t
    where +status in ('succeeded', 'failed', 'canceled')
      and (:status is null or t.status = :status)
      and (:name is null or +t.name = :name)
      and t.completed_at_ms is not null -- the index range then skips live rows
      and t.completed_at_ms < :before_ms
    order by t.completed_at_ms asc
    limit :limit
)
delete from cairnq_tasks
where id in doomed
returning id;
