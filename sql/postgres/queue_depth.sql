-- queue_depth: headroom = max_depth minus the queued rows of one queue (delayed
-- ones included), counting at most max_depth index entries. Params: %(queue)s,
-- %(max_depth)s.
select %(max_depth)s::bigint - count(*) as headroom
from (
    select 1
    from cairnq_tasks
    where queue = %(queue)s::text and status = 'queued'
    limit %(max_depth)s::bigint
) as queued
