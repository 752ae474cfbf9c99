-- stats: row counts per (queue, status), for one queue or all (NULL).
-- Params: :queue. Zero-filling happens in the application.
select queue, status, count(*) as count
from cairnq_tasks
where (:queue::text is null or queue = :queue::text)
group by queue, status
order by queue, status
