-- purge: delete up to :limit terminal tasks of one queue completed strictly before
-- :before_ms, oldest first; their key rows go with them (on delete cascade). The
-- store runs it when a queue is given (purge_by_age otherwise). The queue and the
-- literal status list seek the partial (queue, completed_at_ms) index, walked in
-- completion order; the other filters are read from the rows it yields.
-- Params: :before_ms, :queue; :status, :name (NULL = no filter), :limit
with doomed(id) as (
    select t.id
    from cairnq_tasks as t
    where status in ('succeeded', 'failed', 'canceled')
      and t.queue = :queue
      and (:status is null or t.status = :status)
      and (:name is null or t.name = :name)
      and t.completed_at_ms is not null -- the index range then skips live rows
      and t.completed_at_ms < :before_ms
    order by t.completed_at_ms asc
    limit :limit
)
delete from cairnq_tasks
where id in doomed
returning id;
