-- stats: row counts per (queue, status), optionally for one queue.
-- Params: :queue (NULL = every queue)
select queue, status, count(*) as n
from cairnq_tasks
where (:queue is null or queue = :queue)
group by queue, status
order by queue, status;
