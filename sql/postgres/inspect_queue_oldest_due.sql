-- inspect_queue_oldest_due: per queue, the run_at_ms of the oldest queued task that
-- is due (the queue's latency) and of the next delayed one. In
-- cairnq_tasks_claim_idx (queue, status, priority desc, run_at_ms, id) the first
-- entry of each priority is its smallest run_at_ms, so the queue's priorities are
-- walked with a skip scan and each one costs a seek, not a scan of the backlog.
-- Params: %(now_ms)s.
with recursive queues(queue) as (
    select min(queue) from cairnq_tasks
    union all
    select (select min(t.queue) from cairnq_tasks t where t.queue > queues.queue)
    from queues
    where queues.queue is not null
),
levels(queue, priority) as (
    select q.queue,
           (select max(t.priority) from cairnq_tasks t
            where t.queue = q.queue and t.status = 'queued')
    from queues q
    where q.queue is not null
    union all
    select l.queue,
           (select max(t.priority) from cairnq_tasks t
            where t.queue = l.queue and t.status = 'queued' and t.priority < l.priority)
    from levels l
    where l.priority is not null
)
select l.queue as queue,
       min((select min(t.run_at_ms) from cairnq_tasks t
            where t.queue = l.queue and t.status = 'queued' and t.priority = l.priority
              and t.run_at_ms <= %(now_ms)s)) as oldest_due_ms,
       min((select min(t.run_at_ms) from cairnq_tasks t
            where t.queue = l.queue and t.status = 'queued' and t.priority = l.priority
              and t.run_at_ms > %(now_ms)s)) as next_delayed_ms
from levels l
where l.priority is not null
group by l.queue
order by l.queue;
