-- queue_depth: headroom left under :max_depth queued rows of one queue; the
-- CTE stops after :max_depth index entries, which bounds the cost (§4.7).
-- Params: :queue, :max_depth
with waiting as (
    select 1
    from cairnq_tasks
    where status = 'queued' and queue = :queue
    limit :max_depth
)
select :max_depth - count(*) as headroom
from waiting;
