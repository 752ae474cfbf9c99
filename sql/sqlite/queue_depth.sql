-- queue_depth: headroom left under :max_depth queued rows of one queue; the
-- inner limit bounds the cost by :max_depth index entries (§4.7).
-- Params: :queue, :max_depth
select :max_depth - (
    select count(*) from (
        select 1 from cairnq_tasks
        where queue = :queue and status = 'queued'
        limit :max_depth
    )
) as headroom;
