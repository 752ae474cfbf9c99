-- inspect_queues: every queue holding at least one task, in name order, without a
-- full scan: each step seeks the next distinct queue in cairnq_tasks_claim_idx
-- (a "skip scan" of its leading column), so the cost is one seek per queue.
-- Params: %(limit)s (the most queues returned).
with recursive queues(queue) as (
    select min(queue) from cairnq_tasks
    union all
    select (select min(t.queue) from cairnq_tasks t where t.queue > queues.queue)
    from queues
    where queues.queue is not null
)
select queue from queues where queue is not null
limit %(limit)s;
