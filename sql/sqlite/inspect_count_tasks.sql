-- inspect_count_tasks: how many tasks match the filters, counting at most :cap rows
-- (a result equal to :cap means "at least"), so a refresh never scans a big table.
-- SQLite plans a statement once, whatever its values, so the read is one branch per
-- shape of the filters, each guarded so that exactly one runs (a guard names only
-- parameters: SQLite tests it before its branch reads a row). An id range seeks the
-- primary key when it has both bounds (a prefix), or a lower one (a "since" time)
-- and no filter but the status (a status matches a large share of the rows, the
-- planner's own choice for these shapes); else each combination
-- of status, queue and
-- name is written as the equalities that seek a covering index: claim_idx
-- (queue, status), claim_name_idx (queue, status, name), name_idx,
-- status_completed_idx; with none, the id bounds (open ones '' and x'', which sort
-- before and after every text) are a range of the primary key.
-- "status = +:status": with a bare parameter SQLite weighs the value against the
-- partial lease index's "status = 'running'" and compiles the statement again at
-- each new status; the unary plus (same value) keeps the seek and the compiled plan.
-- Params: :status, :queue, :name (NULL = any); :id_from, :id_to (an id-prefix range,
-- NULL = open); :cap.
select count(*) as n
from (
    select 1 from cairnq_tasks
    where :id_from is not null
      and (:id_to is not null or (:queue is null and :name is null))
      and id >= :id_from and id < coalesce(:id_to, x'')
      and (:status is null or status = :status)
      and (:queue is null or queue = :queue)
      and (:name is null or name = :name)
    union all
    select 1 from cairnq_tasks
    where not (:id_from is not null
               and (:id_to is not null or (:queue is null and :name is null)))
      and :queue is not null and :status is not null and :name is not null
      and queue = :queue
      and status = +:status
      and name = :name
      and (:id_from is null or id >= :id_from)
      and (:id_to is null or id < :id_to)
    union all
    select 1 from cairnq_tasks
    where not (:id_from is not null
               and (:id_to is not null or (:queue is null and :name is null)))
      and :queue is not null and :status is not null and :name is null
      and queue = :queue
      and status = +:status
      and (:id_from is null or id >= :id_from)
      and (:id_to is null or id < :id_to)
    union all
    select 1 from cairnq_tasks
    where not (:id_from is not null
               and (:id_to is not null or (:queue is null and :name is null)))
      and :queue is not null and :status is null and :name is not null
      and queue = :queue
      and name = :name
      and (:id_from is null or id >= :id_from)
      and (:id_to is null or id < :id_to)
    union all
    select 1 from cairnq_tasks
    where not (:id_from is not null
               and (:id_to is not null or (:queue is null and :name is null)))
      and :queue is not null and :status is null and :name is null
      and queue = :queue
      and (:id_from is null or id >= :id_from)
      and (:id_to is null or id < :id_to)
    union all
    select 1 from cairnq_tasks
    where not (:id_from is not null
               and (:id_to is not null or (:queue is null and :name is null)))
      and :queue is null and :status is not null and :name is not null
      and status = +:status
      and name = :name
      and (:id_from is null or id >= :id_from)
      and (:id_to is null or id < :id_to)
    union all
    select 1 from cairnq_tasks
    where not (:id_from is not null
               and (:id_to is not null or (:queue is null and :name is null)))
      and :queue is null and :status is not null and :name is null
      and status = +:status
      and (:id_from is null or id >= :id_from)
      and (:id_to is null or id < :id_to)
    union all
    select 1 from cairnq_tasks
    where not (:id_from is not null
               and (:id_to is not null or (:queue is null and :name is null)))
      and :queue is null and :status is null and :name is not null
      and name = :name
      and (:id_from is null or id >= :id_from)
      and (:id_to is null or id < :id_to)
    union all
    select 1 from cairnq_tasks
    where not (:id_from is not null
               and (:id_to is not null or (:queue is null and :name is null)))
      and :queue is null and :status is null and :name is null
      and id >= coalesce(:id_from, '') and id < coalesce(:id_to, x'')
    limit :cap
) as capped;
