-- queue_depth: headroom = max_depth minus the queued rows of one queue (delayed
-- ones included), counting at most max_depth index entries. Params: :queue,
-- :max_depth.
select :max_depth::bigint - count(*) as headroom
from (
    select 1
    from cairnq_tasks
    where queue = :queue::text and status = 'queued'
    limit :max_depth::bigint
) as queued
