-- purge: delete up to :limit terminal tasks completed strictly before :before_ms,
-- oldest first; their key rows go with them (on delete cascade). The literal
-- status list lets SQLite use the partial queue/completed index.
-- Params: :before_ms, :queue, :status, :name (NULL = no filter), :limit
delete from cairnq_tasks
where id in (
    select id from cairnq_tasks
    where status in ('succeeded', 'failed', 'canceled')
      and (:queue is null or queue = :queue)
      and (:status is null or status = :status)
      and (:name is null or name = :name)
      and completed_at_ms is not null
      and completed_at_ms < :before_ms
    order by completed_at_ms
    limit :limit
)
returning id;
