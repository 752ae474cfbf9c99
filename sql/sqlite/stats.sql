-- stats: row counts per (queue, status), optionally for one queue.
-- Two branches, exactly one of which runs (its guard on :queue is true): with a
-- queue, a seek of the claim index on it; without, a walk of the whole index.
-- SQLite plans a statement once, whatever its values, so each branch is written
-- in the shape that seeks (tests/engine/test_query_plans.py). The branches are one
-- subquery sorted once: its "limit -1" (no limit) keeps SQLite from giving each
-- branch a sorter of its own for the outer order.
-- Params: :queue (NULL = every queue)
select * from (
    select t.queue, t.status, count(*) as n
    from cairnq_tasks as t
    where :queue is not null and t.queue = :queue
    group by t.queue, t.status
    union all
    select t.queue, t.status, count(*) as n
    from cairnq_tasks as t
    where :queue is null
    group by t.queue, t.status
    limit -1
)
order by 1, 2;
