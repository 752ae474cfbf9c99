-- inspect_failures_span: how many failed tasks are kept (up to %(cap)s) and the
-- completion time of the oldest and newest one, from the (status, completed_at_ms)
-- index alone (the order by keeps the count on that index). Params: %(cap)s.
select (select count(*) from (
            select 1 from cairnq_tasks where status = 'failed' order by completed_at_ms desc limit %(cap)s
        ) as capped) as n,
       (select min(completed_at_ms) from cairnq_tasks where status = 'failed') as oldest_ms,
       (select max(completed_at_ms) from cairnq_tasks where status = 'failed') as newest_ms;
