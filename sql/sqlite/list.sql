-- list: tasks matching every supplied filter, newest first, paged.
-- Each filter keeps the "(:p is null or col = :p)" shape: the store rewrites
-- the ones given a value into plain equalities (engine._sql.specialise), so
-- each can seek its index.
-- Params: :status, :queue, :name, :root_id, :correlation_id (NULL = no filter),
--         :limit, :offset
select t.*
from cairnq_tasks as t
where (:queue is null or t.queue = :queue)
  and (:status is null or t.status = :status)
  and (:name is null or t.name = :name)
  and (:root_id is null or t.root_id = :root_id)
  and (:correlation_id is null or t.correlation_id = :correlation_id)
order by t.created_at_ms desc, t.id desc
limit :limit offset :offset;
