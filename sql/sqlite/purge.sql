-- purge: delete up to :limit terminal tasks completed strictly before :before_ms,
-- oldest first; their key rows go with them (on delete cascade). The literal
-- status list lets SQLite use the partial queue/completed index; the optional
-- filters keep the shape engine._sql.specialise rewrites.
-- Params: :before_ms, :queue, :status, :name (NULL = no filter), :limit
with doomed(id) as (
    select t.id
    from cairnq_tasks as t
    where status in ('succeeded', 'failed', 'canceled')
      and (:queue is null or t.queue = :queue)
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
