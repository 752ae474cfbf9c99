-- inspect_failures_floor: the completion time of the (%(skip)s + 1)-th newest failure,
-- the lower edge of a window holding the newest %(skip)s + 1 failed tasks, and of the
-- one after it (whether the window cut anything off). Reads only (status,
-- completed_at_ms) index entries, %(skip)s + 2 of them; no row at all when fewer
-- failures exist (then the window holds them all). Params: %(skip)s.
select completed_at_ms
from cairnq_tasks
where status = 'failed' and completed_at_ms is not null
order by completed_at_ms desc
limit 2 offset %(skip)s;
