-- stats: row counts per (queue, status), optionally for one queue.
-- Params: :queue (NULL = every queue)
select t.queue, t.status, count(*) as n
from cairnq_tasks as t
where (:queue is null or t.queue = :queue)
group by t.queue, t.status
order by t.queue, t.status;
