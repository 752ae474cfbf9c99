-- inspect_queue_counts: tasks per queue and status, each count capped at %(cap)s (a
-- value equal to %(cap)s means "at least"). Queues come from a skip scan of
-- cairnq_tasks_claim_idx, and each cell counts at most %(cap)s entries of that same
-- index, so the cost is bounded by queues x 5 x %(cap)s index entries.
-- Params: %(cap)s.
with recursive queues(queue) as (
    select min(queue) from cairnq_tasks
    union all
    select (select min(t.queue) from cairnq_tasks t where t.queue > queues.queue)
    from queues
    where queues.queue is not null
),
statuses(status) as (
    values ('queued'), ('running'), ('succeeded'), ('failed'), ('canceled')
)
select q.queue as queue, s.status as status,
       (select count(*) from (
            select 1 from cairnq_tasks t
            where t.queue = q.queue and t.status = s.status
            limit %(cap)s
        ) as capped) as n
from queues q
cross join statuses s
where q.queue is not null
order by q.queue, s.status;
