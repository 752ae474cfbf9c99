-- inspect_name_counts: tasks per queue, status and name, each count capped at
-- %(cap)s (a value equal to %(cap)s means "at least"). Everything is a skip scan of
-- cairnq_tasks_claim_name_idx (queue, status, name, ...): the queues, then per
-- queue and status its first %(names)s names in name order, each counting at most
-- %(cap)s entries of that index. The tasks of the names after those are counted
-- together in one more row whose name is null ("other"), also capped. So the cost
-- is bounded by queues x 5 x (%(names)s + 1) x %(cap)s index entries. (The "other" count
-- is ordered as the index is, so no planner trades its range for a table scan
-- that a LIMIT might stop early.) With %(live)s = 1 only the live statuses (queued,
-- running) are counted: what a backlog is, and cheap to count often.
-- Params: %(cap)s, %(names)s, %(live)s.
with recursive queues(queue) as (
    select min(queue) from cairnq_tasks
    union all
    select (select min(t.queue) from cairnq_tasks t where t.queue > queues.queue)
    from queues
    where queues.queue is not null
),
statuses(status) as (
    values ('queued'), ('running'), ('succeeded'), ('failed'), ('canceled')
),
cells(queue, status, name, k) as (
    select q.queue, s.status,
           (select min(t.name) from cairnq_tasks t
            where t.queue = q.queue and t.status = s.status),
           1
    from queues q
    cross join statuses s
    where q.queue is not null and (%(live)s = 0 or s.status in ('queued', 'running'))
    union all
    select c.queue, c.status,
           (select min(t.name) from cairnq_tasks t
            where t.queue = c.queue and t.status = c.status and t.name > c.name),
           c.k + 1
    from cells c
    where c.name is not null and c.k <= %(names)s
)
select c.queue as queue, c.status as status,
       case when c.k > %(names)s then null else c.name end as name,
       case when c.k > %(names)s then
           (select count(*) from (
                select 1 from cairnq_tasks t
                where t.queue = c.queue and t.status = c.status and t.name >= c.name
                order by t.queue, t.status, t.name
                limit %(cap)s
            ) as rest)
       else
           (select count(*) from (
                select 1 from cairnq_tasks t
                where t.queue = c.queue and t.status = c.status and t.name = c.name
                limit %(cap)s
            ) as one)
       end as n
from cells c
where c.name is not null
order by c.queue, c.status, c.k;
